"""Synthesizers selectable by name: the interface, the registry and the seeds' methods.

``histogram-1way`` / ``histogram-nway`` (Programming DP), ``dirichlet-multinomial`` (Hu) and
``cathist`` (Rodriguez & Howe) are registered on import; ``aggregate-seeded`` (SDS) is
registered by its adapter. Use :func:`create` to build one by name.
"""

from sds_core.synthesizers.base import (
    FitResult,
    Synthesizer,
    SynthesizerSpend,
    available,
    create,
    register,
)
from sds_core.synthesizers.cathist import CatHist, CatHistModel
from sds_core.synthesizers.dirichlet import DirichletModel, DirichletMultinomial
from sds_core.synthesizers.histogram import Histogram1Way, HistogramModel, HistogramNWay

__all__ = [
    "CatHist",
    "CatHistModel",
    "DirichletModel",
    "DirichletMultinomial",
    "FitResult",
    "Histogram1Way",
    "HistogramModel",
    "HistogramNWay",
    "Synthesizer",
    "SynthesizerSpend",
    "available",
    "create",
    "register",
]
