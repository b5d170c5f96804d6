"""The user commands beside the pipeline: ``plan``, ``inspect``, ``encode``,
``decode``, ``show``, ``compare`` and ``clean``, with the text helpers that
``encode`` and ``compare`` share (``texts``)."""
