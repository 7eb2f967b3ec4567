#!/usr/bin/env bash
# A CA and the apiserver-plugin's serving certificate, for deploy/apiserver-plugin (kustomize
# puts tls.crt/tls.key into the Secret hypercloud-apiserver-plugin-tls and ca.crt into the
# webhooks' caBundle). The kube-apiserver calls the webhook through its Service, so the name
# is hypercloud-apiserver-plugin.kube-system.svc. Use your own CA instead where you have one.
#   hack/webhook-cert.sh DIR [DAYS]     writes DIR/ca.crt, DIR/tls.crt, DIR/tls.key (DAYS: 365)
set -euo pipefail
dir="${1:-}"
days="${2:-365}"
if [ -z "$dir" ] || [ "$#" -gt 2 ] || ! [[ "$days" =~ ^[1-9][0-9]{0,4}$ ]]; then
  echo "usage: $0 DIR [DAYS (1-99999)]" >&2
  exit 2
fi
command -v openssl >/dev/null || { echo "webhook-cert: openssl is not installed" >&2; exit 1; }
svc=hypercloud-apiserver-plugin.kube-system.svc
mkdir -p "$dir"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days "$days" \
  -keyout "$tmp/ca.key" -out "$tmp/ca.crt" -subj "/CN=hypercloud-apiserver-plugin-ca" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>"$tmp/log" ||
  { cat "$tmp/log" >&2; exit 1; }
openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
  -keyout "$tmp/tls.key" -out "$tmp/tls.csr" -subj "/CN=$svc" 2>"$tmp/log" || { cat "$tmp/log" >&2; exit 1; }
openssl x509 -req -in "$tmp/tls.csr" -CA "$tmp/ca.crt" -CAkey "$tmp/ca.key" -CAcreateserial -days "$days" \
  -out "$tmp/tls.crt" -extfile <(printf '%s\n' "basicConstraints=CA:FALSE" \
    "keyUsage=critical,digitalSignature,keyEncipherment" "extendedKeyUsage=serverAuth" \
    "subjectAltName=DNS:$svc,DNS:$svc.cluster.local,DNS:hypercloud-apiserver-plugin.kube-system") 2>"$tmp/log" ||
  { cat "$tmp/log" >&2; exit 1; }
# The CA's key is not kept: a new certificate comes with a new CA (and caBundle).
install -m 0644 "$tmp/ca.crt" "$dir/ca.crt"
install -m 0644 "$tmp/tls.crt" "$dir/tls.crt"
install -m 0600 "$tmp/tls.key" "$dir/tls.key"
echo "webhook-cert: $dir/ca.crt, $dir/tls.crt, $dir/tls.key for $svc (valid $days days)" >&2
