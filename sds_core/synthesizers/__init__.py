"""Synthesizers selectable by name: the interface, the registry and the seeds' methods.

How it differs from :mod:`sds_core.synthesis`: each synthesizer here is a whole DP method (its
``fit`` spends budget, its ``sample`` post-processes), built by name; ``synthesis`` is only the
record generation of the SDS method from DP aggregates already made, which
``aggregate-seeded`` here (and the release pipeline's ``synthesize`` stage) calls.

``aggregate-seeded`` (SDS), ``histogram-1way`` / ``histogram-nway`` (Programming DP),
``dirichlet-multinomial`` (Hu), ``cathist`` (Rodriguez & Howe), ``mst`` (McKenna et al. 2021)
and ``aim`` (McKenna et al. 2022) are registered on import.
Use :func:`create` to build one by name and :func:`option_names` to see its options.
"""

from sds_core.synthesizers.aggregate_seeded import AggregateSeeded, AggregateSeededModel
from sds_core.synthesizers.aim import Aim
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
from sds_core.synthesizers.mst import Mst, MstModel

__all__ = [
    "AggregateSeeded",
    "AggregateSeededModel",
    "Aim",
    "CatHist",
    "CatHistModel",
    "DirichletModel",
    "DirichletMultinomial",
    "FitResult",
    "Histogram1Way",
    "HistogramModel",
    "HistogramNWay",
    "Mst",
    "MstModel",
    "Synthesizer",
    "SynthesizerSpend",
    "available",
    "create",
    "option_names",
    "register",
]
