"""Driving segments: loading CSVs, selecting and splitting file lists, synthetic generation."""
from .segments import (
    Segment,
    SegmentError,
    load_segment,
    load_segments,
    list_segment_files,
    split_files,
    is_official_eval_file,
    segment_seed,
    is_synthetic_dir,
)

__all__ = [
    "Segment",
    "SegmentError",
    "load_segment",
    "load_segments",
    "list_segment_files",
    "split_files",
    "is_official_eval_file",
    "segment_seed",
    "is_synthetic_dir",
]
