import os

os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=true")
os.environ.setdefault("JAXRL_VERBOSE", "")
# JAX's persistent compilation cache in the user's cache folder: repeated local runs skip the
# compiles (minutes on 2 cores). CI starts with an empty cache and must pass that way too;
# set JAXRL_TEST_CACHE=0 to turn it off.
if os.environ.get("JAXRL_TEST_CACHE", "1") != "0":
    _cache = os.path.join(os.path.expanduser("~"), ".cache", "jaxrl", "jax-compilation")
    os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", _cache)
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "1")
