"""The cluster files of docs/guides/train-on-a-cluster.md hold what their tools accept: the
Ray cluster launcher's file passes Ray's own validation (its JSON schema, after the
defaults `ray up` fills in), and the KubeRay manifest's pod templates are Kubernetes pod
templates the `kubernetes` package reads without dropping a field. Both offer the
environment resource a run's `runtime.ray.env_resource` names by default."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from trainer.config import RayConfig

CLUSTER = Path(__file__).resolve().parents[1] / "packaging" / "cluster"
ENV_RESOURCE = RayConfig().env_resource


def _load(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((CLUSTER / name).read_text())
    return loaded


def _validate_ray_up(config: dict[str, Any]) -> None:
    from ray.autoscaler._private.util import prepare_config, validate_config

    validate_config(prepare_config(copy.deepcopy(config)))


def test_the_ray_up_file_passes_rays_validation() -> None:
    pytest.importorskip("ray", reason="Ray is the [cluster] extra")
    config = _load("ray-up.yaml")
    _validate_ray_up(config)
    types = config["available_node_types"]
    assert types[config["head_node_type"]]["resources"].get("GPU") == 1  # the learner
    assert types["environments"]["resources"][ENV_RESOURCE] >= 1
    assert types["rollout"]["resources"]["GPU"] == 1
    # the validation is real: a misspelt field is refused
    from jsonschema import ValidationError

    wrong = copy.deepcopy(config)
    wrong["available_node_types"]["environments"]["resource"] = {ENV_RESOURCE: 1}
    with pytest.raises(ValidationError, match="'resource' was unexpected"):
        _validate_ray_up(wrong)


def _pod_template_problems(template: dict[str, Any]) -> list[str]:
    """What of `template` the kubernetes models do not hold (a misspelt or misplaced
    field is dropped when read: read back, the template differs)."""
    from kubernetes.client import ApiClient

    api = ApiClient()
    model = api.deserialize(json.dumps(template), "V1PodTemplateSpec", "application/json")
    read_back = api.sanitize_for_serialization(model)
    return [] if read_back == template else [f"read back as {read_back}"]


def test_the_kuberay_manifest_holds_pod_templates_kubernetes_reads() -> None:
    pytest.importorskip("kubernetes", reason="the kubernetes package is in the [cluster] extra")
    manifest = _load("raycluster.yaml")
    assert (manifest["apiVersion"], manifest["kind"]) == ("ray.io/v1", "RayCluster")
    spec = manifest["spec"]
    groups = {g["groupName"]: g for g in spec["workerGroupSpecs"]}
    for name, group in [("head", spec["headGroupSpec"]), *groups.items()]:
        assert _pod_template_problems(group["template"]) == [], name
        # KubeRay passes rayStartParams to `ray start` as strings only
        assert all(isinstance(v, str) for v in group["rayStartParams"].values()), name
    for group in groups.values():
        assert group["minReplicas"] <= group["replicas"] <= group["maxReplicas"]
    # the environment pods offer the resource (KubeRay's quoted JSON), the rollout pods a GPU
    offered = json.loads(json.loads(groups["environments"]["rayStartParams"]["resources"]))
    assert offered[ENV_RESOURCE] >= 1
    (rollout,) = groups["rollout"]["template"]["spec"]["containers"]
    assert rollout["resources"]["limits"]["nvidia.com/gpu"] == "1"
    # the check is real: a misplaced field does not read back
    wrong = copy.deepcopy(spec["headGroupSpec"]["template"])
    wrong["spec"]["containers"][0]["gpu"] = 1
    assert _pod_template_problems(wrong)


def test_the_kuberay_image_is_built_from_this_checkout_with_what_nodes_need() -> None:
    """The Dockerfile the manifest's image comes from (not built here: no container
    engine): a Debian base with a Python the project accepts, the Makefile's own Debian
    list (`make apt`, not a copy), the cluster extra, wget for KubeRay's probes; the
    manifest names it, and the build context leaves the virtualenvs out."""
    import re
    import tomllib

    text = (CLUSTER / "Dockerfile").read_text()
    base = re.search(r"^FROM python:(\d+)\.(\d+)-slim-bookworm$", text, re.M)
    assert base is not None
    project = tomllib.loads((CLUSTER.parent.parent / "pyproject.toml").read_text())
    least = re.fullmatch(r">=(\d+)\.(\d+)", project["project"]["requires-python"])
    assert least is not None
    assert (int(base[1]), int(base[2])) >= (int(least[1]), int(least[2]))
    runs = " ".join(re.findall(r"^RUN (.+)$", text.replace("\\\n", " "), re.M))
    assert "make apt" in runs and "make code-server" in runs
    assert re.search(r'pip install [^\n]*-e "\.\[[^\]]*\bcluster\b', runs)
    assert " wget " in runs
    assert "packaging/cluster/Dockerfile" in (CLUSTER / "raycluster.yaml").read_text()
    ignored = (CLUSTER.parent.parent / ".dockerignore").read_text().split()
    assert {".venv", ".venv-vllm", ".git"} <= set(ignored)
