"""The input side of the core: value objects, SDS preprocessing, readers, binning and decoding.

``preparation.prepare`` turns a sensitive table into a ``PreparedTable`` (integer codes over a
``Domain``); ``decoding`` turns codes back into text; ``text`` holds the trimming, escaping and
name-matching rules and ``zeros`` finds the "0" cells preparation empties. Nothing here is
differentially private.
"""
