"""Face: the report as TensorBoard scalars and HParams (``tb-mfu export-scalars``), and the event-file writer."""
