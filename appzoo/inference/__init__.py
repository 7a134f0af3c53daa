"""Running a trained model: the prediction loop, export, the engines (dygraph, Paddle Inference, ONNX Runtime) and the Predictor."""
