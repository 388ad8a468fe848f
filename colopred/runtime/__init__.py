"""The runtime a scheduler imports: profiles in, predictions and placements out.

Never imports the measurement side (GPU harness, profilers, zoo), the research side or the CLI, and
imports XGBoost only when a model is loaded or trained. Modules:

  outcome     δ, normalised throughput, memory fit (the one definition of each)
  features    JobProfile sets -> feature rows
  baseline    the contention baseline (the model's physical part)
  estimator   SlowdownModel, a scikit-learn-compatible regressor (scikit-learn imported only to fit)
  manifest    model files: strict-JSON manifest + XGBoost UBJ, checksums; the shipped models in models/
  predictor   Predictor and Prediction
  explain     Prediction.explain: a job's slowdown taken apart into contributions, in words
  observed    measured collocations fed back: a job's later predictions shifted toward them
  checks      the API's argument checks, and the warnings where a prediction leaves the model's experience
  placement   Predictor.pack's search
  request     placement requests read (a file, or a document with names resolved by the caller)
  documents   the JSON answers the CLI prints and the service returns
"""
