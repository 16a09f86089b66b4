"""Real Helm (v4, through the helm-sdkpy bindings) for esr-deploytool.

    esr_helm.py lint CHART
    esr_helm.py install --kubeconfig K --namespace NS --release R [--values JSON] CHART
    esr_helm.py uninstall --kubeconfig K --namespace NS --release R

Each prints one JSON object on stdout. On a Helm error it prints {"error": "..."} and exits 1.
install never waits for readiness (the API server of the tests runs no pods) and creates the
namespace when missing.
"""

import argparse
import asyncio
import json
import sys

import helm_sdkpy as helm


async def lint(args):
    cfg = helm.Configuration(namespace="default", kubeconfig="/nonexistent")
    res = await helm.Lint(cfg).run(args.chart)
    messages = [
        {"severity": m.get("Severity"), "path": m.get("Path"), "err": str(m.get("Err"))}
        for m in (res.get("Messages") or [])
    ]
    return {"messages": messages, "errors": [str(e) for e in (res.get("Errors") or [])]}


async def install(args):
    cfg = helm.Configuration(namespace=args.namespace, kubeconfig=args.kubeconfig)
    values = json.loads(args.values) if args.values else None
    res = await helm.Install(cfg).run(
        args.release,
        args.chart,
        values=values,
        create_namespace=True,
        wait=False,
        timeout=120,
        disable_openapi_validation=True,
    )
    return res


async def uninstall(args):
    cfg = helm.Configuration(namespace=args.namespace, kubeconfig=args.kubeconfig)
    return await helm.Uninstall(cfg).run(args.release, wait=False, timeout=120)


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    lp = sub.add_parser("lint")
    lp.add_argument("chart")
    for name in ("install", "uninstall"):
        sp = sub.add_parser(name)
        sp.add_argument("--kubeconfig", required=True)
        sp.add_argument("--namespace", required=True)
        sp.add_argument("--release", required=True)
        if name == "install":
            sp.add_argument("--values", default="")
            sp.add_argument("chart")
    args = p.parse_args()
    run = {"lint": lint, "install": install, "uninstall": uninstall}[args.cmd]
    try:
        out = asyncio.run(run(args))
    except helm.HelmError as e:
        print(json.dumps({"error": str(e)}))
        sys.exit(1)
    print(json.dumps(out, default=str))


if __name__ == "__main__":
    main()
