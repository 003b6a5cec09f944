"""Synthesizers selectable by name: the interface, the registry and the seeds' methods.

``aggregate-seeded`` (SDS), ``histogram-1way`` / ``histogram-nway`` (Programming DP),
``dirichlet-multinomial`` (Hu) and ``cathist`` (Rodriguez & Howe) are registered on import.
Use :func:`create` to build one by name and :func:`option_names` to see its options.
"""

from sds_core.synthesizers.aggregate_seeded import AggregateSeeded, AggregateSeededModel
from sds_core.synthesizers.base import (
    FitResult,
    Synthesizer,
    SynthesizerSpend,
    available,
    create,
    option_names,
    register,
)
from sds_core.synthesizers.cathist import CatHist, CatHistModel
from sds_core.synthesizers.dirichlet import DirichletModel, DirichletMultinomial
from sds_core.synthesizers.histogram import Histogram1Way, HistogramModel, HistogramNWay

__all__ = [
    "AggregateSeeded",
    "AggregateSeededModel",
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
    "option_names",
    "register",
]
