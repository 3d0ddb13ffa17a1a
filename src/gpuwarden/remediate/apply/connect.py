"""Finding the API server as kubectl does: ``--kubeconfig``, else ``$KUBECONFIG``, else
``~/.kube/config``, else the pod's service account. A kubeconfig that cannot be used is an
``InputError`` naming it; no cluster at all is an ``EnvironmentProblemError``."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

from gpuwarden.errors import EnvironmentProblemError, InputError
from gpuwarden.remediate.apply.client import (
    DEFAULT_REQUEST_TIMEOUT_S,
    KubeCluster,
    import_kubernetes,
)


def _kubeconfig_problem(path: str | None, text: str) -> InputError:
    where = f"the kubeconfig {path!r}" if path else "the kubeconfig"
    return InputError(
        f"{where} cannot be used: {text}",
        reference="kubeconfig-invalid",
        hint="check it with `kubectl config view`; --context names one of its contexts",
    )


def _active_user(
    kubernetes: Any, path: str | None, context: str | None
) -> tuple[str | None, str | None]:
    try:
        contexts, active = kubernetes.config.list_kube_config_contexts(config_file=path)
    except Exception:  # the client raises what its YAML reader raises; the load said it all
        return None, context
    chosen = next((c for c in contexts if c.get("name") == context), active) if context else active
    if not isinstance(chosen, dict):
        return None, context
    user = (chosen.get("context") or {}).get("user")
    return (str(user) if user else None), chosen.get("name")


def _not_a_file(path: str) -> str | None:
    """Why ``path`` is no file to read a kubeconfig from ("does not exist", "a directory", the
    system's word for a path it refuses), or None for a regular file."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "does not exist"
    except OSError as exc:  # a name too long, a component that is a file, no permission
        return f"cannot be read: {exc.strerror or exc}"
    except ValueError:  # a NUL byte
        return "is no path"
    if stat.S_ISDIR(mode):
        return "is a directory"
    return None if stat.S_ISREG(mode) else "is not a regular file"


def _kubeconfig_file(kubeconfig: str | None) -> str | None:
    """The kubeconfig to load, as kubectl finds it: --kubeconfig, else $KUBECONFIG (a list,
    merged), else ~/.kube/config; None when there is none (then: in a pod, or no cluster)."""
    if kubeconfig is not None:
        problem = _not_a_file(kubeconfig)
        if problem is not None:
            raise InputError(
                f"the kubeconfig {kubeconfig!r} {problem}",
                reference="kubeconfig-missing",
                hint="pass the file kubectl uses (--kubeconfig ~/.kube/config)",
            )
        return kubeconfig
    listed = os.environ.get("KUBECONFIG", "")
    if listed:
        if all(_not_a_file(p) for p in listed.split(os.pathsep) if p):
            raise InputError(
                f"$KUBECONFIG ({listed}) names no file that exists",
                reference="kubeconfig-missing",
                hint="point KUBECONFIG at the file kubectl uses, or pass --kubeconfig",
            )
        return listed
    default = str(Path("~/.kube/config").expanduser())
    return None if _not_a_file(default) else default


def _load(kubernetes: Any, path: str, context: str | None, configuration: Any) -> None:
    try:
        kubernetes.config.load_kube_config(
            config_file=path,
            context=context,
            client_configuration=configuration,
            persist_config=False,
        )
    except kubernetes.config.ConfigException as exc:
        raise _kubeconfig_problem(path, str(exc)) from None
    except (TypeError, KeyError, AttributeError) as exc:
        # YAML that is no kubeconfig (a word, a list): the loader indexes what it is not
        raise _kubeconfig_problem(
            path,
            f"not a kubeconfig (kubectl's YAML mapping of clusters, contexts and users): {exc}",
        ) from None
    except (OSError, ValueError) as exc:
        raise _kubeconfig_problem(path, f"{type(exc).__name__}: {exc}") from None
    except Exception as exc:  # yaml.YAMLError and friends: the file is not YAML
        if type(exc).__module__.startswith("yaml"):
            raise _kubeconfig_problem(path, f"not YAML ({exc})") from None
        raise


def connect(
    kubeconfig: str | None = None,
    context: str | None = None,
    request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S,
) -> KubeCluster:
    """The API server of ``kubeconfig`` (else ``$KUBECONFIG``, ``~/.kube/config``, or the pod's
    service account when running in a cluster). Nothing is sent yet."""
    kubernetes = import_kubernetes()
    path = _kubeconfig_file(kubeconfig)
    configuration = kubernetes.client.Configuration()
    if path is not None:
        _load(kubernetes, path, context, configuration)
        user, context = _active_user(kubernetes, path, context)
    elif os.environ.get("KUBERNETES_SERVICE_HOST"):
        try:
            kubernetes.config.load_incluster_config(client_configuration=configuration)
        except kubernetes.config.ConfigException as exc:
            raise EnvironmentProblemError(
                f"in a pod, but its service account cannot be used: {exc}",
                reference="kubeconfig-missing",
                hint="mount the service account token (automountServiceAccountToken: true), or "
                "pass --kubeconfig",
            ) from None
        user, context = "serviceaccount", None
    else:
        raise EnvironmentProblemError(
            "no kubeconfig: ~/.kube/config does not exist and this is not a pod",
            reference="kubeconfig-missing",
            hint="pass --kubeconfig FILE, set KUBECONFIG, or run in the cluster",
        )
    configuration.retries = False  # one try per request: the callers decide what to retry
    api_client = kubernetes.client.ApiClient(configuration)
    return KubeCluster(
        api_client, configuration.host, context, user, request_timeout_s=request_timeout_s
    )
