"""Tasks that look like gymnasium environment ids but that gymnasium does not know: the
error a user gets names gymnasium (and how to register an environment), not the
language-model tasks a non-gymnasium task would otherwise be looked up among."""

from __future__ import annotations

import re
from pathlib import Path

# gymnasium's id grammar ([namespace/]name-vN) with the version required: every
# language-model task name and data file lacks a trailing -v<digits>
GYM_ID = re.compile(r"^(?:[\w:.-]+/)?[\w:.-]+-v\d+$")


def unknown_gym_id(task: str) -> str | None:
    """The error message for `task` when it has the form of a gymnasium id (Name-vN,
    namespace/Name-vN) and gymnasium has no environment under it; None for a registered id
    or a task of another form (a language-model task, a data file). routing.py sends a
    module:Name-vN task to envs/user.py first (its module registers the id), so this
    message is for the other two forms."""
    if not GYM_ID.match(task) or Path(task).exists():
        return None
    try:
        import gymnasium
    except ImportError:
        return (
            f"task {task!r} looks like a gymnasium environment id, but gymnasium is not "
            "installed; accepted: install gymnasium, or a language-model task "
            "(policylab list)"
        )
    import policylab.envs  # noqa: F401  (registers the policylab/... ids)

    if task in gymnasium.registry:
        return None
    try:
        gymnasium.spec(task)
        why = ""
    except gymnasium.error.Error as err:
        why = f" (gymnasium: {str(err).rstrip('.')})"
    return (
        f"task {task!r} looks like a gymnasium environment id, but gymnasium "
        f"{gymnasium.__version__} has no environment registered under it{why}. Accepted: "
        "an id gymnasium knows (installed packages register theirs: ale-py for ALE/..., "
        "mujoco for the MuJoCo ids), or `module:Name-vN`, which imports `module` first so "
        "that its gymnasium.register(...) runs; language-model tasks: policylab list"
    )
