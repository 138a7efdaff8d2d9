#!/usr/bin/env bash
# Makes ./secrets for compose.yaml (or $HCPFLOW_COMPOSE_SECRETS): random passwords and
# keys, and each service's settings file. Files that exist are kept (run it again after adding a NATS user: only what is
# missing is made). The directory is the host's guard (0700); its files are readable by
# the containers' own users (postgres, nonroot 65532), into which compose mounts them.
#
# Two files are placeholders to replace before `docker compose up`: aws-credentials (an
# AWS shared credentials file for the activity workers' principal) and kubeconfig (the
# management cluster's). Keep them readable (0644, as made here): the activity
# container's user (65532) reads them where compose mounts them.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
dir=${HCPFLOW_COMPOSE_SECRETS:-$here/secrets}
accounts=$here/../nats/hcpflow-accounts.conf
mkdir -p "$dir"
chmod 0700 "$dir"

random() { head -c "${1:-24}" /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n'; }
# Writes file $1 from standard input, unless it exists: whole or not at all (an
# interrupted run leaves no half-written file to be kept for good).
make() {
  local path=$dir/$1
  if [[ -e $path ]]; then cat > /dev/null; return; fi
  cat > "$path.tmp"
  [[ -s $path.tmp ]] || { rm -f "$path.tmp"; echo "make-secrets: nothing to write to $1" >&2; exit 1; }
  chmod 0644 "$path.tmp"
  mv "$path.tmp" "$path"
  printf 'made secrets/%s\n' "$1"
}
value() { cat "$dir/$1"; }

random | make postgres-superuser-password
random | make postgres-owner-password
random | make postgres-app-password
printf 'compose-1:%s\n' "$(head -c 32 /dev/urandom | base64)" | make seal-key
head -c 32 /dev/urandom | base64 | make input-digest-key
head -c 32 /dev/urandom | base64 | make audit-signing-key

# Every NATS user the accounts file names gets a password (kept in nats-passwords, one
# `VARIABLE password` a line); nats-accounts.conf is the accounts file with each password
# variable replaced by its password, made anew every run (nats-server cannot read a
# variable one included file defines in another).
passwords=$dir/nats-passwords
touch "$passwords"
chmod 0600 "$passwords"
for variable in $(grep -oE 'password: \$[A-Z0-9_]+' "$accounts" | cut -d'$' -f2 | sort -u); do
  grep -q "^$variable " "$passwords" || printf '%s %s\n' "$variable" "$(random)" >> "$passwords"
done
nats_password() {
  local variable password
  variable=HCPFLOW_NATS_PASSWORD_$(printf '%s' "$1" | tr 'a-z-' 'A-Z_')
  password=$(grep -E "^$variable " "$passwords" | cut -d' ' -f2)
  [[ -n $password ]] || { echo "make-secrets: $accounts has no NATS user $1" >&2; exit 1; }
  printf '%s' "$password"
}
substitutions=$(awk '{ printf "s/\\$%s\\b/\"%s\"/g;", $1, $2 }' "$passwords")
sed -e "$substitutions" "$accounts" > "$dir/nats-accounts.conf.tmp"
chmod 0644 "$dir/nats-accounts.conf.tmp"
mv "$dir/nats-accounts.conf.tmp" "$dir/nats-accounts.conf"

app_url="postgres://hcpflow_app:$(value postgres-app-password)@postgres:5432/hcpflow"
owner_url="postgres://hcpflow_owner:$(value postgres-owner-password)@postgres:5432/hcpflow"
# The settings of the service that runs as NATS user hcpflow-$1.
settings() {
  local user=hcpflow-$1 password
  password=$(nats_password "$user")
  cat <<TOML
# Settings of the $1 service (deploy/compose/compose.yaml); holds its secrets.
database_url = "$app_url"
nats_url = "nats://nats:4222"
nats_user = "$user"
nats_password = "$password"
nats_inbox_prefix = "_INBOX_$user"
TOML
}
{ settings migrate; printf 'database_admin_url = "%s"\n' "$owner_url"; } | make hcpflow-migrate.toml
settings api | make hcpflow-api.toml
settings engine | make hcpflow-engine.toml
settings activity | make hcpflow-activity.toml

printf '# Replace with an AWS shared credentials file ([default] aws_access_key_id = ...).\n' |
  make aws-credentials
printf '# Replace with the kubeconfig of the management cluster.\n' | make kubeconfig
