"""Where traces are: locations, local files, trace names, listings, opening any location, the sidecar."""
