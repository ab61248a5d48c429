"""Remote logdirs through fsspec: storage options, the guarded HTTP file system, redaction of secrets."""
