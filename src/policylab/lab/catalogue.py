"""Every lab method and task, in one place (as tabular/catalogue.py): each module below
registers its entries; tables read from here are complete."""

from __future__ import annotations

import policylab.lab.ac_flow  # noqa: F401  (G3 AC-Flow: ac_flow_provisional on lab/ring)
import policylab.lab.afgr  # noqa: F401  (§16 AFGR; imported to register its entries)
import policylab.lab.dgpo  # noqa: F401  (G2 DGPO: lab/ring; dgpo, orw_cfm_w2, flow_grpo_sde)
import policylab.lab.digits  # noqa: F401  (G0.6–G0.8: lab/digits, the class-conditional digits flow)
import policylab.lab.disk  # noqa: F401  (§15 DISK: lab/image_pairs; disk, supervised_grid, harris)
import policylab.lab.dpg_t2i  # noqa: F401  (G5: lab/digits_personal; dpg_t2i, dpg_t2i_similarity, dreambooth)
import policylab.lab.hgam  # noqa: F401  (§12: lab/uav_coverage; hgam_provisional, maddpg, uav_script)
import policylab.lab.hnpg  # noqa: F401  (§8: lab/combination_lock; hnpg, trpo, fqe_greedy)
import policylab.lab.mbpg  # noqa: F401  (§11: lab/tracking and the MB-PG arms)
import policylab.lab.nll_to_po  # noqa: F401  (G6: lab/gaussian_fit, po_mse, digits_classify; nll, nll_to_po)
import policylab.lab.ppga  # noqa: F401  (§9: lab/noisy_point_mass, PPGA, MAP-Elites, CMA-MAE)
import policylab.lab.recsys_lists  # noqa: F401  (§14 Rank-GRPO)
import policylab.lab.recsys_tpgr  # noqa: F401  (§14 TPGR)
import policylab.lab.rocm  # noqa: F401  (G4 ROCM: rocm_*_provisional, rocm_none, rlcm on lab/ring)
from policylab.lab import build, is_lab_task, lab_methods, lab_tasks

__all__ = ["build", "is_lab_task", "lab_methods", "lab_tasks"]
