"""deploy/ checked against the project it deploys: the image definition, the KubeRay manifests
and the guide name only commands, flags, images and environment variables that exist, and no
secret; the local cluster script parses, explains itself and refuses bad input.
"""

from __future__ import annotations

import functools
import os
import re
import shlex
import socket
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import redis
import typer
import yaml  # type: ignore[import-untyped]
from pydantic import BaseModel

from grove.cli.app import app
from grove.providers.credentials import API_KEY_ENV
from grove.providers.model_specs import parse_model_spec
from grove.supervisor.batch.tasks import read_tasks
from grove.supervisor.config import GroveSettings, load_settings
from tests.conformance.corpus import REPO_ROOT
from tests.conftest import required_binary

DEPLOY = REPO_ROOT / "deploy"
KUBERAY = DEPLOY / "kuberay"
DOCKERFILE = DEPLOY / "Dockerfile"
SCRIPT = DEPLOY / "local" / "cluster.sh"
LAUNCHER = DEPLOY / "local" / "ray_nodes.py"
GUIDE = DEPLOY / "README.md"
PYPROJECT = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
SCRIPT_TIMEOUT_S = 30

PROVIDER_KEYS = {names[0] for names in API_KEY_ENV.values()}
SECRET_NAME = re.compile(r"(API_KEY|PASSWORD|PASSWD|TOKEN|SECRET|_AUTH)$")
KEY_SHAPES = re.compile(r"sk-ant-[A-Za-z0-9_-]{8,}|\bsk-[A-Za-z0-9_-]{20,}|AIza[0-9A-Za-z_-]{30,}")
URL_PASSWORD = re.compile(r"\b[a-z][a-z0-9+.-]*://[^:@/\s]*:([^@/\s]+)@")
REFERENCE = re.compile(r"\$\((\w+)\)")

# Field names of the KubeRay v1 API (ray.io/v1 RayJobSpec, RayClusterSpec, HeadGroupSpec,
# WorkerGroupSpec): a misspelt field is dropped silently by the API server, so catch it here.
RAYJOB_FIELDS = {
    "activeDeadlineSeconds", "backoffLimit", "rayClusterSpec", "submitterPodTemplate",
    "metadata", "clusterSelector", "submitterConfig", "managedBy", "deletionStrategy",
    "entrypoint", "runtimeEnvYAML", "jobId", "submissionMode", "entrypointResources",
    "entrypointNumCpus", "entrypointNumGpus", "ttlSecondsAfterFinished",
    "shutdownAfterJobFinishes", "suspend", "schedule",
}  # fmt: skip
RAYCLUSTER_FIELDS = {
    "headGroupSpec", "workerGroupSpecs", "rayVersion", "enableInTreeAutoscaling",
    "autoscalerOptions", "headServiceAnnotations", "suspend", "managedBy",
    "gcsFaultToleranceOptions", "authOptions",
}  # fmt: skip
HEAD_GROUP_FIELDS = {"serviceType", "headService", "enableIngress", "rayStartParams", "template"}
WORKER_GROUP_FIELDS = {
    "groupName", "replicas", "minReplicas", "maxReplicas", "numOfHosts", "rayStartParams",
    "template", "scaleStrategy", "suspend", "idleTimeoutSeconds",
}  # fmt: skip
# Variables a non-Grove container may get although its own command never names them.
READ_BY_TOOL = {"REDISCLI_AUTH": "redis-cli"}


# ---- reading -------------------------------------------------------------------------------


def load_manifest(path: Path) -> list[dict[str, Any]]:
    return [document for document in yaml.safe_load_all(path.read_text()) if document]


@functools.cache
def manifests() -> dict[str, list[dict[str, Any]]]:
    return {path.name: load_manifest(path) for path in sorted(KUBERAY.glob("*.yaml"))}


def all_documents() -> list[dict[str, Any]]:
    return [document for documents in manifests().values() for document in documents]


def documents_of_kind(kind: str) -> list[dict[str, Any]]:
    return [document for document in all_documents() if document["kind"] == kind]


def pod_templates(node: Any, where: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every pod template (a mapping whose `spec` holds `containers`) below `node`."""
    if isinstance(node, dict):
        spec = node.get("spec")
        if isinstance(spec, dict) and "containers" in spec:
            yield where, node
        for key, value in node.items():
            yield from pod_templates(value, f"{where}.{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from pod_templates(value, f"{where}[{index}]")


def all_pod_templates() -> list[tuple[str, dict[str, Any]]]:
    return [
        (f"{name}:{document['kind']}{where}", template)
        for name, documents in manifests().items()
        for document in documents
        for where, template in pod_templates(document)
    ]


def all_containers() -> list[tuple[str, dict[str, Any]]]:
    return [
        (f"{where} container {container['name']}", container)
        for where, template in all_pod_templates()
        for container in template["spec"]["containers"]
    ]


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments left out."""
    joined = re.sub(r"\\\n\s*", " ", DOCKERFILE.read_text())
    return [
        (line.split(None, 1)[0].upper(), line.split(None, 1)[1] if " " in line else "")
        for line in (raw.strip() for raw in joined.splitlines())
        if line and not line.startswith("#")
    ]


def documented_image() -> str:
    match = re.search(r"^# Image: (\S+)$", DOCKERFILE.read_text(), re.MULTILINE)
    assert match, "deploy/Dockerfile documents no `# Image: NAME:TAG` line"
    return match.group(1)


def base_image_ray_version() -> tuple[str, str]:
    """The Ray version and the Python tag (e.g. '311') of the Dockerfile's base image."""
    froms = [
        arguments for instruction, arguments in dockerfile_instructions() if instruction == "FROM"
    ]
    assert len(froms) == 1, froms
    match = re.fullmatch(r"rayproject/ray:(\d+\.\d+\.\d+)-py(\d{3})", froms[0])
    assert match, f"the base image is not an official rayproject/ray:X.Y.Z-pyNNN one: {froms[0]}"
    return match.group(1), match.group(2)


def version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def grove_containers() -> list[tuple[str, dict[str, Any]]]:
    image = documented_image()
    return [(where, c) for where, c in all_containers() if c["image"] == image]


# ---- the image -----------------------------------------------------------------------------


def test_every_manifest_parses_into_named_kubernetes_objects() -> None:
    assert set(manifests()) == {"batch-input.yaml", "raycluster.yaml", "rayjob.yaml", "redis.yaml"}
    for name, documents in manifests().items():
        assert documents, f"{name} holds no object"
        for document in documents:
            assert document["apiVersion"] and document["kind"], name
            assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", document["metadata"]["name"])
    assert {d["kind"] for d in all_documents()} >= {"RayCluster", "RayJob", "Deployment", "Service"}


def test_the_manifests_run_the_image_the_dockerfile_documents() -> None:
    image = documented_image()
    assert image == f"grove:{PYPROJECT['project']['version']}"
    labels = " ".join(
        arguments for instruction, arguments in dockerfile_instructions() if instruction == "LABEL"
    )
    assert f'org.opencontainers.image.version="{PYPROJECT["project"]["version"]}"' in labels
    ray_pods = [
        (where, template)
        for where, template in all_pod_templates()
        if "RayCluster" in where or "RayJob" in where
    ]
    assert len(ray_pods) == 5  # head and workers twice, and the RayJob's submitter
    for where, template in ray_pods:
        for container in template["spec"]["containers"]:
            assert container["image"] == image, where


def test_ray_version_is_the_base_images_and_satisfies_pyproject() -> None:
    ray_version, python_tag = base_image_ray_version()
    requirement = next(d for d in PYPROJECT["project"]["dependencies"] if d.startswith("ray"))
    lower_bound = re.fullmatch(r"ray>=([\d.]+)", requirement)
    assert lower_bound, requirement
    assert version_tuple(ray_version) >= version_tuple(lower_bound.group(1))
    python_bound = re.fullmatch(r">=(\d+)\.(\d+)", PYPROJECT["project"]["requires-python"])
    assert python_bound and python_tag == "311"
    assert (3, int(python_tag[1:])) >= (int(python_bound.group(1)), int(python_bound.group(2)))
    cluster_specs = [d["spec"] for d in documents_of_kind("RayCluster")] + [
        d["spec"]["rayClusterSpec"] for d in documents_of_kind("RayJob")
    ]
    assert [spec["rayVersion"] for spec in cluster_specs] == [ray_version, ray_version]


def test_the_dockerfile_installs_the_project_and_runs_unprivileged() -> None:
    instructions = dockerfile_instructions()
    runs = [arguments for instruction, arguments in instructions if instruction == "RUN"]
    assert any(re.search(r"\bpip install\b.*\s\.(\s|$)", run) for run in runs), runs
    users = [arguments for instruction, arguments in instructions if instruction == "USER"]
    assert users, "no USER: the image would run as root"
    uid = users[-1].split(":")[0]
    assert uid.isdigit() and int(uid) != 0, (
        f"the last USER must be a numeric non-root uid: {users[-1]}"
    )
    for template_where, template in all_pod_templates():
        if template["spec"]["containers"][0]["image"] == documented_image():
            assert str(template["spec"]["securityContext"]["runAsUser"]) == uid, template_where


def test_the_image_copies_every_package_and_only_what_exists() -> None:
    copied: list[str] = []
    for instruction, arguments in dockerfile_instructions():
        if instruction == "COPY":
            words = [w for w in arguments.split() if not w.startswith("--")]
            copied += words[:-1]
    for source in copied:
        assert (REPO_ROOT / source).exists(), f"COPY names {source}, which is not in the repository"
    packages = {
        p.rstrip("*") for p in PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"]
    }
    assert packages <= set(copied), f"packages not copied: {packages - set(copied)}"
    assert {"pyproject.toml", "README.md"} <= set(copied)
    ignore = (DEPLOY / "Dockerfile.dockerignore").read_text().splitlines()
    rules = [line for line in ignore if line and not line.startswith("#")]
    assert rules[0] == "**", "the build context must start from nothing"
    included = {rule[1:].removesuffix("/**") for rule in rules if rule.startswith("!")}
    assert included == set(copied)


def test_no_secret_in_the_dockerfile() -> None:
    text = DOCKERFILE.read_text()
    assert not KEY_SHAPES.search(text)
    for instruction, arguments in dockerfile_instructions():
        if instruction in ("ENV", "ARG"):
            name = re.split(r"[=\s]", arguments, maxsplit=1)[0]
            assert not SECRET_NAME.search(name), f"{instruction} {name} would bake a secret in"


# ---- commands ------------------------------------------------------------------------------


def parse_grove_command(tokens: list[str]) -> tuple[str, dict[str, Any]]:
    """Parse `grove [GLOBAL OPTIONS] COMMAND ARGS` with Grove's own command line, without
    running it: an unknown command or flag, or a value of the wrong kind, raises."""
    group = typer.main.get_command(app)
    assert isinstance(group, typer.core.TyperGroup)
    position = next(i for i, token in enumerate(tokens) if token in group.commands)
    name = tokens[position]
    context = group.make_context("grove", [*tokens[:position], name])
    command = group.get_command(context, name)
    assert command is not None
    return name, dict(command.make_context(name, tokens[position + 1 :], parent=context).params)


def rayjob_entrypoint() -> list[str]:
    (rayjob,) = documents_of_kind("RayJob")
    return shlex.split(rayjob["spec"]["entrypoint"])


def test_the_rayjob_runs_grove_batch_with_flags_grove_has() -> None:
    tokens = rayjob_entrypoint()
    assert tokens[0] in PYPROJECT["project"]["scripts"]
    name, params = parse_grove_command(tokens[1:])
    assert name == "batch"
    parse_model_spec(params["model"])
    assert params["concurrency"] >= 1


def test_the_command_parser_refuses_what_grove_refuses() -> None:
    with pytest.raises(typer.exceptions.TyperException, match="No such option"):
        parse_grove_command(["batch", "tasks.jsonl", "--no-such-flag"])
    with pytest.raises(typer.exceptions.TyperException, match="greater than or equal to 1"):
        parse_grove_command(["batch", "tasks.jsonl", "--concurrency", "0"])
    with pytest.raises(StopIteration):
        parse_grove_command(["bach", "tasks.jsonl"])


def head_container(cluster_spec: dict[str, Any]) -> dict[str, Any]:
    container: dict[str, Any] = cluster_spec["headGroupSpec"]["template"]["spec"]["containers"][0]
    return container


def test_the_rayjobs_files_are_where_the_head_mounts_them() -> None:
    (rayjob,) = documents_of_kind("RayJob")
    cluster = rayjob["spec"]["rayClusterSpec"]
    pod = cluster["headGroupSpec"]["template"]["spec"]
    mounts = {m["mountPath"]: m["name"] for m in head_container(cluster)["volumeMounts"]}
    volumes = {volume["name"]: volume for volume in pod["volumes"]}
    _, params = parse_grove_command(rayjob_entrypoint()[1:])
    (config_map,) = documents_of_kind("ConfigMap")
    for path in (params["tasks_path"], params["context_path"]):
        volume = volumes[mounts[str(path.parent)]]
        assert volume["configMap"]["name"] == config_map["metadata"]["name"]
        assert path.name in config_map["data"]
    output = volumes[mounts[str(params["output_path"].parent)]]
    claims = {d["metadata"]["name"] for d in documents_of_kind("PersistentVolumeClaim")}
    assert output["persistentVolumeClaim"]["claimName"] in claims


def test_the_example_tasks_and_context_are_valid_batch_input() -> None:
    (config_map,) = documents_of_kind("ConfigMap")
    tasks = read_tasks(config_map["data"]["tasks.jsonl"].encode())
    assert not tasks.errors, tasks.errors
    assert len(tasks.tasks) >= 2
    for task in tasks.tasks:
        if task.model is not None:
            parse_model_spec(task.model)
    assert config_map["data"]["context.md"].strip()


def test_ray_start_params_are_options_of_ray_start() -> None:
    from ray.scripts.scripts import start

    options = {option for param in start.params for option in param.opts}
    specs = [d["spec"] for d in documents_of_kind("RayCluster")] + [
        d["spec"]["rayClusterSpec"] for d in documents_of_kind("RayJob")
    ]
    for spec in specs:
        groups = [spec["headGroupSpec"], *spec["workerGroupSpecs"]]
        for group in groups:
            for key in group["rayStartParams"]:
                assert f"--{key}" in options, f"ray start has no --{key}"


def test_kuberay_objects_use_only_fields_of_the_kuberay_api() -> None:
    for rayjob in documents_of_kind("RayJob"):
        assert rayjob["apiVersion"] == "ray.io/v1"
        assert set(rayjob["spec"]) <= RAYJOB_FIELDS, set(rayjob["spec"]) - RAYJOB_FIELDS
    specs = [d["spec"] for d in documents_of_kind("RayCluster")] + [
        d["spec"]["rayClusterSpec"] for d in documents_of_kind("RayJob")
    ]
    for spec in specs:
        assert set(spec) <= RAYCLUSTER_FIELDS, set(spec) - RAYCLUSTER_FIELDS
        assert {"rayStartParams", "template"} <= set(spec["headGroupSpec"]) <= HEAD_GROUP_FIELDS
        for group in spec["workerGroupSpecs"]:
            assert {"groupName", "rayStartParams", "template"} <= set(group) <= WORKER_GROUP_FIELDS
            assert group["minReplicas"] <= group["replicas"] <= group["maxReplicas"]


# ---- environment ---------------------------------------------------------------------------


def config_field(name: str) -> str | None:
    """The GroveSettings field a GROVE_* variable sets ('hosts.count'), or None."""
    parts = name.removeprefix("GROVE_").lower().split("__")
    model: type[BaseModel] = GroveSettings
    for index, part in enumerate(parts):
        field = model.model_fields.get(part)
        if field is None:
            return None
        if index < len(parts) - 1:
            annotation = field.annotation
            if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
                return None
            model = annotation
    return ".".join(parts)


@functools.cache
def ray_reads(name: str) -> bool:
    """Whether Ray's installed code names the variable (its Python or its compiled core)."""
    import ray

    package = Path(ray.__file__).parent
    needle = name.encode()
    files = [*package.rglob("*.py"), *package.glob("_raylet*.so")]
    return any(needle in path.read_bytes() for path in files)


def env_problem(name: str, later_values: list[str]) -> str | None:
    """Why Grove's container should not set `name`, or None when Grove or Ray reads it."""
    if name in PROVIDER_KEYS:
        return None
    if name.startswith("GROVE_"):
        return None if config_field(name) else f"{name} is no Grove setting"
    if name.startswith("RAY_"):
        return None if ray_reads(name) else f"Ray does not read {name}"
    if any(f"$({name})" in value for value in later_values):
        return None
    return f"{name} is read by neither Grove nor Ray, nor used by a later variable"


def test_grove_containers_set_only_variables_grove_or_ray_read() -> None:
    containers = grove_containers()
    assert len(containers) == 5
    for where, container in containers:
        env = container.get("env", [])
        for index, variable in enumerate(env):
            later = [str(v.get("value", "")) for v in env[index + 1 :]]
            problem = env_problem(variable["name"], later)
            assert problem is None, f"{where}: {problem}"
        assert "envFrom" not in container, f"{where}: name each variable, so each can be checked"


def test_the_variable_checker_rejects_what_nothing_reads() -> None:
    assert config_field("GROVE_HOSTS__COUNT") == "hosts.count"
    assert config_field("GROVE_STORE") == "store"
    assert config_field("GROVE_HOSTS__COUNTS") is None
    assert config_field("GROVE_STORE__URL") is None
    assert env_problem("GROVE_NO_SUCH_SETTING", []) is not None
    assert env_problem("RAY_NO_SUCH_VARIABLE_XYZ", []) is not None
    assert env_problem("RAY_ADDRESS", []) is None
    assert env_problem("REDIS_PASSWORD", ["redis://:$(REDIS_PASSWORD)@host:6379/0"]) is None
    assert env_problem("REDIS_PASSWORD", ["redis://host:6379/0"]) is not None


def test_other_containers_use_every_variable_they_get() -> None:
    for where, container in all_containers():
        if container["image"] == documented_image():
            continue
        commands = yaml.safe_dump(
            [container.get("command"), container.get("args"), container.get("readinessProbe")]
        )
        for variable in container.get("env", []):
            name = variable["name"]
            tool = READ_BY_TOOL.get(name)
            used = f"${name}" in commands or f"$({name})" in commands
            assert used or (tool is not None and tool in commands), f"{where}: {name} unused"


def test_grove_settings_load_from_the_manifests_variables(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("GROVE_CONFIG_FILE", str(tmp_path / "absent.toml"))
    for _, container in grove_containers():
        settings_env = {
            v["name"]: REFERENCE.sub("placeholder", v["value"])
            for v in container.get("env", [])
            if v["name"].startswith("GROVE_")
        }
        for name in [key for key in os.environ if key.startswith("GROVE_")]:
            if name != "GROVE_CONFIG_FILE":
                monkeypatch.delenv(name)
        for name, value in settings_env.items():
            monkeypatch.setenv(name, value)
        settings = load_settings()
        for name, value in settings_env.items():
            field = config_field(name)
            assert field is not None
            loaded: Any = settings
            for part in field.split("."):
                loaded = getattr(loaded, part)
            assert str(loaded) == value


def test_the_store_url_names_the_redis_service_and_port() -> None:
    (service,) = documents_of_kind("Service")
    port = service["spec"]["ports"][0]["port"]
    stores = [
        v["value"]
        for _, c in grove_containers()
        for v in c.get("env", [])
        if v["name"] == "GROVE_STORE"
    ]
    assert len(stores) == 2  # the RayCluster's head and the RayJob's head
    for store in stores:
        parts = urlsplit(store)
        assert parts.scheme == "redis" and parts.hostname == service["metadata"]["name"]
        assert parts.port == port and parts.path == "/0"


def test_every_pod_that_runs_agents_gets_every_providers_key() -> None:
    for where, container in grove_containers():
        if "submitterPodTemplate" in where:
            continue
        names = {variable["name"] for variable in container.get("env", [])}
        assert names >= PROVIDER_KEYS, f"{where} lacks {PROVIDER_KEYS - names}"


# ---- secrets -------------------------------------------------------------------------------


def secret_problems(documents: list[dict[str, Any]]) -> list[str]:
    """Every literal secret in `documents`: keys and passwords must come from secretKeyRef."""
    problems = [f"a {d['kind']} object holds values" for d in documents if d["kind"] == "Secret"]
    for document in documents:
        for where, template in pod_templates(document):
            for container in template["spec"]["containers"]:
                problems += container_secret_problems(f"{where}/{container['name']}", container)
        if KEY_SHAPES.search(yaml.safe_dump(document)):
            problems.append(f"{document['kind']} {document['metadata']['name']} holds an API key")
    return problems


def container_secret_problems(where: str, container: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    from_secrets: set[str] = set()
    for variable in container.get("env", []):
        name = variable["name"]
        if "secretKeyRef" in variable.get("valueFrom", {}):
            from_secrets.add(name)
        elif SECRET_NAME.search(name):
            problems.append(f"{where}: {name} is not taken from a Secret")
        value = str(variable.get("value", ""))
        for password in URL_PASSWORD.findall(value):
            reference = REFERENCE.fullmatch(password)
            if not (reference and reference.group(1) in from_secrets):
                problems.append(f"{where}: {name} holds a literal password")
    script = yaml.safe_dump([container.get("command"), container.get("args")])
    for password in re.findall(r"requirepass\s+(\S+)", script):
        if password.lstrip("$").strip("{}()") not in from_secrets:
            problems.append(f"{where}: requirepass is given a literal password")
    return problems


def test_no_manifest_holds_a_literal_secret() -> None:
    for name, documents in manifests().items():
        assert secret_problems(documents) == [], name
    references = [
        v["valueFrom"]["secretKeyRef"]
        for _, c in all_containers()
        for v in c.get("env", [])
        if "secretKeyRef" in v.get("valueFrom", {})
    ]
    assert len(references) >= 12
    guide = GUIDE.read_text()
    for secret in {reference["name"] for reference in references}:
        assert f"kubectl create secret generic {secret}" in guide, (
            f"the guide never creates {secret}"
        )


def test_the_secret_checker_finds_literal_secrets() -> None:
    pod = {
        "kind": "Deployment",
        "metadata": {"name": "leaky"},
        "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "i", "env": [
            {"name": "ANTHROPIC_API_KEY", "value": "not-from-a-secret"},
            {"name": "GROVE_STORE", "value": "redis://:hunter2@grove-redis:6379/0"},
            {"name": "OTHER", "value": "sk-ant-api03-AAAAAAAAAAAAAAAA"},
        ], "args": ["requirepass hunter2"]}]}}},
    }  # fmt: skip
    secret = {"kind": "Secret", "metadata": {"name": "s"}, "stringData": {"k": "v"}}
    problems = secret_problems([pod, secret])
    assert len(problems) == 5, problems


# ---- resources and privileges --------------------------------------------------------------


def test_every_container_has_resource_requests_and_limits() -> None:
    containers = all_containers()
    assert len(containers) == 6
    for where, container in containers:
        resources = container["resources"]
        for kind in ("requests", "limits"):
            assert {"cpu", "memory"} <= set(resources[kind]), f"{where}: {kind}"


def test_every_pod_runs_unprivileged() -> None:
    for where, template in all_pod_templates():
        context = template["spec"]["securityContext"]
        assert context["runAsNonRoot"] is True and int(context["runAsUser"]) > 0, where
        for container in template["spec"]["containers"]:
            security = container["securityContext"]
            assert security["allowPrivilegeEscalation"] is False, where
            assert "ALL" in security["capabilities"]["drop"], where


def test_references_between_the_manifests_resolve() -> None:
    config_maps = {d["metadata"]["name"] for d in documents_of_kind("ConfigMap")}
    claims = {d["metadata"]["name"] for d in documents_of_kind("PersistentVolumeClaim")}
    for where, template in all_pod_templates():
        for volume in template["spec"].get("volumes", []):
            if "configMap" in volume:
                assert volume["configMap"]["name"] in config_maps, where
            if "persistentVolumeClaim" in volume:
                assert volume["persistentVolumeClaim"]["claimName"] in claims, where
        names = {volume["name"] for volume in template["spec"].get("volumes", [])}
        for container in template["spec"]["containers"]:
            for mount in container.get("volumeMounts", []):
                assert mount["name"] in names, f"{where}: {mount['name']}"
    (policy,) = documents_of_kind("NetworkPolicy")
    allowed = policy["spec"]["ingress"][0]["from"][0]["podSelector"]["matchLabels"]
    for where, template in all_pod_templates():
        if template["spec"]["containers"][0]["image"] == documented_image():
            labels = template["metadata"]["labels"]
            assert allowed.items() <= labels.items(), f"{where} could not reach Redis"


# ---- the Redis server's own startup, run for real ------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def raw_reply(port: int, request: bytes) -> str:
    """Redis's first reply to `request` on a fresh, unauthenticated connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=2) as connection:
        connection.sendall(request)
        return connection.recv(4096).decode()


def test_the_redis_container_starts_a_server_that_demands_the_password(tmp_path: Path) -> None:
    required_binary("redis-server")
    (deployment,) = documents_of_kind("Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    port = free_port()
    # Only where it listens and writes changes: this machine's loopback and a temp directory.
    script = container["args"][0].replace("port 6379", f"port {port}")
    script = script.replace("bind * -::*", "bind 127.0.0.1").replace("dir /data", f"dir {tmp_path}")
    password = "p" + os.urandom(12).hex()
    process = subprocess.Popen(
        [*container["command"], script],
        env={"PATH": os.environ["PATH"], "REDIS_PASSWORD": password},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        client = redis.Redis(host="127.0.0.1", port=port, password=password, socket_timeout=2)
        deadline = time.monotonic() + 10
        while True:
            try:
                assert client.ping()
                break
            except redis.ConnectionError:
                assert time.monotonic() < deadline and process.poll() is None
                time.sleep(0.05)
        assert client.config_get("maxmemory-policy") == {"maxmemory-policy": "noeviction"}
        assert client.config_get("appendonly") == {"appendonly": "yes"}
        assert raw_reply(port, b"AUTH wrong\r\n").startswith("-WRONGPASS")
        assert raw_reply(port, b"GET any\r\n").startswith("-NOAUTH")
        command_line = Path(f"/proc/{process.pid}/cmdline").read_bytes()
        assert password.encode() not in command_line
        client.close()
    finally:
        process.terminate()
        process.wait(timeout=10)


# ---- the local cluster script --------------------------------------------------------------


def run_script(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=SCRIPT_TIMEOUT_S,
        check=False,
    )


def test_the_script_is_valid_bash_with_strict_mode() -> None:
    result = subprocess.run(
        ["bash", "-n", str(SCRIPT)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    assert "set -euo pipefail" in SCRIPT.read_text()
    assert os.access(SCRIPT, os.X_OK)


def test_the_script_explains_itself() -> None:
    result = run_script("--help")
    assert result.returncode == 0, result.stderr
    for word in ("start", "stop", "stop-worker", "status", "env", "--state-dir", "--python"):
        assert re.search(rf"^\s+{re.escape(word)}\s", result.stdout, re.MULTILINE), word
    assert "127.0.0.1" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "no command given"),
        (("launch",), "unknown argument 'launch'"),
        (("start", "stop"), "one command at a time"),
        (("start", "--head-cpus", "0"), "--head-cpus takes a positive whole number, not '0'"),
        (("start", "--worker-cpus", "two"), "--worker-cpus takes a positive whole number"),
        (("start", "--object-store-mb", "10"), "--object-store-mb must be at least 80"),
        (("start", "--state-dir"), "--state-dir needs a value"),
    ],
)
def test_the_script_refuses_bad_arguments_and_starts_nothing(
    args: tuple[str, ...], message: str, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    result = run_script(*args, *(() if "--state-dir" in args else ("--state-dir", str(state))))
    assert result.returncode == 1
    assert f"cluster.sh: {message}" in result.stderr
    assert result.stdout == ""
    assert not state.exists()


def test_the_script_with_nothing_started(tmp_path: Path) -> None:
    stop = run_script("stop", "--state-dir", str(tmp_path / "none"))
    assert stop.returncode == 0 and "nothing to stop" in stop.stderr
    status = run_script("status", "--state-dir", str(tmp_path))
    assert status.stdout.splitlines() == ["redis: not running", "ray-nodes: not running"]
    env = run_script("env", "--state-dir", str(tmp_path))
    assert env.returncode == 1 and "nothing started" in env.stderr
    worker = run_script("stop-worker", "--state-dir", str(tmp_path))
    assert worker.returncode == 1 and "no Ray nodes" in worker.stderr


def test_the_script_exports_only_what_grove_or_ray_reads() -> None:
    exported = re.findall(r"^export (\w+)=", SCRIPT.read_text(), re.MULTILINE)
    assert set(exported) >= {"RAY_ADDRESS", "GROVE_STORE"}
    for name in exported:
        assert env_problem(name, []) is None, name


def test_the_script_stops_only_its_own_processes() -> None:
    code = re.sub(r"\nusage\(\) \{.*?\n\}\n", "\n", SCRIPT.read_text(), flags=re.DOTALL)
    assert "cat <<'EOF'" not in code  # the help text, which names 6379, is left out
    for way in ("pkill", "killall", "ray stop", "pgrep", "6379"):
        assert way not in code, f"cluster.sh must not use {way!r}"


def test_the_node_launcher_refuses_bad_arguments(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(LAUNCHER), "--temp-dir", str(tmp_path), "--worker-cpus", "0"],
        capture_output=True,
        text=True,
        timeout=SCRIPT_TIMEOUT_S,
        check=False,
    )
    assert result.returncode == 2
    assert "--head-cpus and --worker-cpus must be at least 1" in result.stderr


# ---- the guide -----------------------------------------------------------------------------


def guide_commands() -> list[list[str]]:
    """Each command of the guide's ```bash blocks, continuation lines joined, as words."""
    blocks = re.findall(r"```bash\n(.*?)```", GUIDE.read_text(), re.DOTALL)
    lines = re.sub(r"\\\n\s*", " ", "".join(blocks)).splitlines()
    # The command inside `eval "$(...)"` counts as a command of its own.
    lines = [line.replace('"$(', " ").replace(')"', " ") for line in lines]
    return [shlex.split(line, comments=True) for line in lines if line.strip()]


def words_after(words: list[str], program: str) -> list[str] | None:
    """The arguments given to `program` in a command line, up to a shell operator."""
    for index, word in enumerate(words):
        if word == program or word.endswith(f"/{program}"):
            rest = words[index + 1 :]
            stop = next((i for i, w in enumerate(rest) if w in ("|", "&&", ";", ">", "||")), None)
            return rest if stop is None else rest[:stop]
    return None


def test_every_grove_command_in_the_guide_parses() -> None:
    commands = [args for words in guide_commands() if (args := words_after(words, "grove"))]
    assert len(commands) >= 3
    for args in commands:
        name, _ = parse_grove_command(args)
        assert name in ("batch", "agents", "events", "history", "run")


def test_every_script_command_in_the_guide_exists() -> None:
    usage = run_script("--help").stdout
    calls = [args for words in guide_commands() if (args := words_after(words, "cluster.sh"))]
    assert {args[0] for args in calls} >= {"start", "stop", "stop-worker"}
    for args in calls:
        assert re.search(rf"^\s+{re.escape(args[0])}\s", usage, re.MULTILINE), args
        for option in (word for word in args if word.startswith("--")):
            assert re.search(rf"^\s+{re.escape(option)}\b", usage, re.MULTILINE), option


def test_the_guide_applies_every_manifest() -> None:
    guide = GUIDE.read_text()
    for name in manifests():
        assert f"deploy/kuberay/{name}" in guide, name
    assert "docker build -f deploy/Dockerfile -t " + documented_image() in guide
