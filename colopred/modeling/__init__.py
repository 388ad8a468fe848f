"""Features, models, evaluation. Imports xgboost lazily (the GPU side does not have it)."""
