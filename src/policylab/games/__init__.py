"""Differentiable games and Small-Gain Nash certificates (spec §0.3, §4; arXiv:2512.06791)."""

from policylab.games.game import (
    BlockBounds,
    DifferentiableGame,
    block_bounds,
    bounds_from_jacobians,
    box_points,
    game_jacobian,
    pseudo_gradient,
)
from policylab.games.quadratic import linear_game, quadratic_game, quadratic_jacobian, scalar_game
from policylab.games.sgn import (
    Certificate,
    euclidean_certificate,
    sgn_certificate,
    sgn_margin,
    true_margin,
    two_player_band,
)
from policylab.games.stability import h_stab, metric_norm, rk4_step_matrix, step_matrix

__all__ = [
    "BlockBounds",
    "Certificate",
    "DifferentiableGame",
    "block_bounds",
    "bounds_from_jacobians",
    "box_points",
    "euclidean_certificate",
    "game_jacobian",
    "h_stab",
    "linear_game",
    "metric_norm",
    "pseudo_gradient",
    "quadratic_game",
    "quadratic_jacobian",
    "rk4_step_matrix",
    "scalar_game",
    "sgn_certificate",
    "sgn_margin",
    "step_matrix",
    "true_margin",
    "two_player_band",
]
