"""Records: how measured and candidate programs are stored and read back (the database format,
candidate pools, trace JSON, TenSet import, the feature cache, splits, staging of new directories)."""
