"""Method stages (stages/base.py): prompt sources, annotators, augmenters, filters,
advantage-time selectors and learn-time token masks, registered by name in `stages`."""

from policylab.stages.base import KINDS, Budget, Stage, StageContext, register, stages
from policylab.stages.pipeline import Pipeline, RolloutSource, build_pipeline
from policylab.stages.prompts import VADE, VAS, Offline, PromptStage, Uniform
from policylab.stages.rank_items import RankItems
from policylab.stages.rollouts import (
    AdvantageSelector,
    Difficulty,
    Filter,
    StepLabels,
    TokenMask,
)

__all__ = [
    "KINDS",
    "VADE",
    "VAS",
    "AdvantageSelector",
    "Budget",
    "Difficulty",
    "Filter",
    "Offline",
    "Pipeline",
    "PromptStage",
    "RankItems",
    "RolloutSource",
    "Stage",
    "StageContext",
    "StepLabels",
    "TokenMask",
    "Uniform",
    "build_pipeline",
    "register",
    "stages",
]
