//! End-to-end test harness: starts esr-testkit (or uses ESR_E2E_KUBECONFIG) and the real `esr` binary.
