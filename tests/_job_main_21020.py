
import os, sys
import ray
print("the key is", os.environ.get("OPENAI_API_KEY"))
ray.init()
@ray.remote
def probe():
    import reward_fns.gsm8k  # the uploaded working_dir is on PYTHONPATH
    return (os.environ.get("OPENAI_API_KEY") is not None, os.path.exists("runtime_env.yaml"),
            os.path.exists(".git") or os.path.exists("data") or os.path.exists(".venv"))
key, repo, excluded_present = ray.get(probe.remote())
print(f"job worker: key={key} repo={repo} excluded_present={excluded_present}")
