#!/usr/bin/env bash
# `make demo`: not yet. The controller and esr-testkit land in later steps.
echo "make demo: not yet - the controller and the local API server are still being built."
