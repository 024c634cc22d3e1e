"""Deployment: ONNX / `jax.export` artifacts with a parity check, the jaxpr-to-ONNX converter,
and videos of a trained policy."""
