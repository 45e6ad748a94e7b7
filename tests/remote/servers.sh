#!/usr/bin/env bash
# servers.sh - the real servers the remote tests and `bench remote` run
# against (docs/REMOTE.md), all on 127.0.0.1 with free ports:
#
#   nginx     HTTP and HTTPS (a private CA made here with openssl), serving
#             DIR/www; fault locations (403/404/500/503, Range ignored), a
#             per-connection bandwidth cap, and the Hugging Face Hub's URL
#             layout for every repo under DIR/www/hf/ORG/NAME (resolve ->
#             302 to /cdn/ with X-Linked-Etag = sha256, X-Linked-Size,
#             X-Repo-Commit; revisions main, HF_COMMIT and refs/pr/1, which
#             clients send as refs%2Fpr%2F1)
#   s3rver    the S3 API (npm s3rver, installed into build/npm on first use),
#             bucket "bkt" filled with DIR/s3/* (credentials S3RVER/S3RVER)
#   httpfault tools/httpfault.py: truncated bodies, stalls, flaky 503s, an
#             ETag that changes, a wrong Content-Range
#   delay     tools/delayhdr.py behind nginx's /delayed/: each request waits
#             DELAY_MS (a bounded range also its length / RATE) before nginx
#             serves it (X-Accel-Redirect) from an internal location (a
#             stream: limit_rate RATE): an object store's first-byte latency
#             and per-connection bandwidth, for short ranged GETs too (bench
#             remote). /limited/ (nginx's
#             limit_rate alone) lets each request's first ~RATE bytes
#             through at once and caps only long streams.
#
# Usage:
#   servers.sh start DIR OWNER_PID [nginx] [s3] [fault] [delay]
#       starts the named servers (default nginx s3 fault) and writes DIR/env
#       (KEY=VALUE lines: HTTP, HTTPS, CA, S3, FAULT, DELAY, HF_COMMIT).
#       A watchdog stops them when OWNER_PID exits, so nothing outlives the
#       test even if it is killed. Exit 77 with the reason on stdout when a
#       server cannot run here (no nginx, no node, no s3rver package).
#   servers.sh stop DIR
#
# Knobs: RATE (per connection: nginx limit_rate of /limited/ and the pacing of
# /delayed/; default 100m = 100 MiB/s), DELAY_MS (first-byte latency of
# /delayed/, default 20).
set -u
REPO=$(cd "$(dirname "$0")/../.." && pwd)
cmd=${1:-}
DIR=${2:-}
[ -n "$DIR" ] || { echo "usage: servers.sh start|stop DIR [OWNER_PID] [servers...]" >&2; exit 2; }

free_port() {
  /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

wait_port() { # port: bounded wait (10 s) until something accepts on it
  local i
  for i in $(seq 1 100); do
    (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}

# running PID: the process has not exited. A zombie has: the servers'
# parent (servers.sh) is gone, so they are reaped by init, which may take
# seconds (kill -0 succeeds on a zombie; waiting on it cost ~2 s a stop)
running() {
  local st
  st=$(sed -n 's/^.*) \(.\).*/\1/p' "/proc/$1/stat" 2>/dev/null) || st=""
  if [ -n "$st" ]; then [ "$st" != Z ]; else kill -0 "$1" 2>/dev/null; fi
}

stop_all() {
  local f pid
  for f in "$DIR"/*.pid; do
    [ -e "$f" ] || continue
    pid=$(cat "$f" 2>/dev/null)
    [ -n "$pid" ] && kill "$pid" 2>/dev/null
    rm -f "$f"
  done
  # bounded wait for the processes to go
  for f in $(seq 1 50); do
    local alive=0
    for pid in $(cat "$DIR"/.pids 2>/dev/null); do running "$pid" && alive=1; done
    [ $alive = 0 ] && break
    sleep 0.1
  done
  for pid in $(cat "$DIR"/.pids 2>/dev/null); do kill -9 "$pid" 2>/dev/null; done
  rm -f "$DIR"/.pids
}

if [ "$cmd" = stop ]; then
  [ -f "$DIR/watchdog.pid" ] && kill "$(cat "$DIR/watchdog.pid")" 2>/dev/null
  rm -f "$DIR/watchdog.pid"
  stop_all
  exit 0
fi
[ "$cmd" = start ] || { echo "servers.sh: unknown command '$cmd'" >&2; exit 2; }
OWNER=${3:-$PPID}
shift 3 2>/dev/null || shift $#
want="${*:-nginx s3 fault}"
mkdir -p "$DIR/www" "$DIR/s3" "$DIR/logs"
# APPEND=1: add servers to a running set (the unit tests start s3rver only
# when a test asks for it); otherwise the env file starts empty
[ "${APPEND:-0}" = 1 ] || : > "$DIR/env"
RATE=${RATE:-100m}
DELAY_MS=${DELAY_MS:-20}

started() { echo "$1" > "$DIR/$2.pid"; echo "$1" >> "$DIR/.pids"; }

# ---- nginx -------------------------------------------------------------------
if [[ " $want " == *" nginx "* || " $want " == *" delay "* ]]; then
  NGINX=$(command -v nginx || echo /usr/sbin/nginx)
  [ -x "$NGINX" ] || { echo "nginx is not installed (Debian package nginx; scripts/deps.sh test)"; exit 77; }
  command -v openssl >/dev/null || { echo "openssl is not installed"; exit 77; }
  if [ ! -f "$DIR/ca.pem" ]; then
    ( cd "$DIR" &&
      openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ca.key -out ca.pem \
        -days 2 -subj /CN=pagein-test-CA &&
      openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout srv.key -out srv.csr \
        -subj /CN=127.0.0.1 &&
      printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n' > srv.ext &&
      openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out srv.pem -days 2 -extfile srv.ext
    ) > "$DIR/logs/openssl.log" 2>&1 || { echo "openssl could not make the test certificates"; exit 1; }
  fi
  HP=$(free_port); SP=$(free_port); DP=$(free_port)
  HF_COMMIT=0123456789abcdef0123456789abcdef01234567
  # the Hub's layout: one exact location per file of every repo under www/hf
  hub=""
  if [ -d "$DIR/www/hf" ]; then
    while IFS= read -r f; do
      rel=${f#"$DIR/www/hf/"}           # ORG/NAME/PATH
      org=${rel%%/*}; rest=${rel#*/}; name=${rest%%/*}; path=${rest#*/}
      sha=$(sha256sum "$f" | cut -d' ' -f1); size=$(stat -c %s "$f")
      for rev in main $HF_COMMIT refs/pr/1; do
        hub+="    location = /$org/$name/resolve/$rev/$path {
      add_header X-Linked-Etag '\"$sha\"' always;
      add_header X-Linked-Size $size always;
      add_header X-Repo-Commit $HF_COMMIT always;
      add_header ETag '\"$sha\"' always;
      return 302 /cdn/$org/$name/$path;
    }
"
      done
    done < <(find "$DIR/www/hf" -type f | sort)
    # the Hub's listing API per repo: /api/models/ORG/NAME/revision/REV
    for repo in "$DIR"/www/hf/*/*; do
      [ -d "$repo" ] || continue
      rn=${repo#"$DIR/www/hf/"}
      # with each file's size, as the Hub answers ?blobs=true (pagein asks so)
      sib=$(cd "$repo" && find . -type f -printf '%P\t%s\n' | sort | awk -F'\t' '{printf "{\"rfilename\":\"%s\",\"size\":%s}\n", $1, $2}' | paste -sd, -)
      # served from a file: nginx refuses a `return` text of a repo of 1,000 files
      mkdir -p "$DIR/hfapi/$rn"
      printf '{"id":"%s","sha":"%s","siblings":[%s]}' "$rn" "$HF_COMMIT" "$sib" > "$DIR/hfapi/$rn/listing.json"
      for rev in main $HF_COMMIT refs/pr/1; do
        hub+="    location = /api/models/$rn/revision/$rev {
      default_type application/json;
      alias $DIR/hfapi/$rn/listing.json;
    }
"
      done
    done
  fi
  user=""; [ "$(id -u)" = 0 ] && user="user root;"
  cat > "$DIR/nginx.conf" <<EOF
$user
daemon off;
master_process on;
worker_processes ${NGINX_WORKERS:-1};
pid $DIR/nginx.master.pid;
error_log $DIR/logs/nginx-error.log warn;
events { worker_connections 1024; }
http {
  access_log $DIR/logs/nginx-access.log;
  # when each request ended and how long it took: bench/open_many.sh's peak in flight
  log_format timing '\$msec \$request_time \$status "\$request"';
  access_log $DIR/logs/nginx-timing.log timing;
  client_body_temp_path $DIR/nginx-tmp/body;
  proxy_temp_path $DIR/nginx-tmp/proxy;
  fastcgi_temp_path $DIR/nginx-tmp/fastcgi;
  uwsgi_temp_path $DIR/nginx-tmp/uwsgi;
  scgi_temp_path $DIR/nginx-tmp/scgi;
  default_type application/octet-stream;
  sendfile on;
  keepalive_requests 100000;
  keepalive_timeout 60s;
  upstream delay { server 127.0.0.1:$DP; keepalive 64; }
  server {
    listen 127.0.0.1:$HP;
    listen 127.0.0.1:$SP ssl http2;
    ssl_certificate $DIR/srv.pem;
    ssl_certificate_key $DIR/srv.key;
    root $DIR/www;
    location /files/ { alias $DIR/www/; }
    location /norange/ { alias $DIR/www/; max_ranges 0; }
    location /limited/ { alias $DIR/www/; limit_rate $RATE; }
    location /cdn/ { alias $DIR/www/hf/; }
    location /delayed/ {
      proxy_pass http://delay;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }
    location /internal/ { internal; alias $DIR/www/; }
    location /internal-limited/ { internal; alias $DIR/www/; limit_rate $RATE; }
    location = /status/403 { return 403 "<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>"; }
    location = /status/404 { return 404; }
    location = /status/500 { return 500; }
    location = /status/503 { return 503; }
$hub  }
}
EOF
  mkdir -p "$DIR/nginx-tmp"
  "$NGINX" -c "$DIR/nginx.conf" -p "$DIR" > "$DIR/logs/nginx.out" 2>&1 &
  started $! nginx
  wait_port "$HP" && wait_port "$SP" || { echo "nginx did not start:"; cat "$DIR/logs/nginx.out" "$DIR/logs/nginx-error.log" 2>/dev/null | tail -5; exit 1; }
  { echo "HTTP=http://127.0.0.1:$HP"; echo "HTTPS=https://127.0.0.1:$SP"; echo "CA=$DIR/ca.pem"; echo "HF_COMMIT=$HF_COMMIT"; } >> "$DIR/env"
fi

# ---- s3rver ------------------------------------------------------------------
if [[ " $want " == *" s3 "* ]]; then
  command -v node >/dev/null || { echo "node is not installed (Debian package nodejs)"; exit 77; }
  S3JS=$REPO/build/npm/node_modules/s3rver/bin/s3rver.js
  mkdir -p "$REPO/build/npm" || exit 1
  # looked at under the lock: another runner's npm may be writing the
  # package (its bin/s3rver.js there before its dependencies)
  if ! flock -w 600 "$REPO/build/npm/.install.lock" test -f "$S3JS"; then
    command -v npm >/dev/null || { echo "npm is not installed (Debian package npm)"; exit 77; }
    # one npm at a time in build/npm (make check runs two test runners)
    flock -w 600 "$REPO/build/npm/.install.lock" sh -c '[ -f "$1/node_modules/s3rver/bin/s3rver.js" ] ||
      timeout 300 npm install --prefix "$1" --no-audit --no-fund s3rver@3.7.1' _ "$REPO/build/npm" > "$DIR/logs/npm.log" 2>&1 \
      || { echo "npm could not install s3rver (offline?): $(tail -1 "$DIR/logs/npm.log")"; exit 77; }
  fi
  S3P=$(free_port)
  mkdir -p "$DIR/s3data"
  node "$S3JS" -d "$DIR/s3data" -a 127.0.0.1 -p "$S3P" -s --configure-bucket bkt > "$DIR/logs/s3rver.log" 2>&1 &
  started $! s3rver
  # the same over TLS with the private CA (AWS_CA_BUNDLE), when nginx made
  # it: started now, so that the two node processes start side by side
  if [ -f "$DIR/srv.pem" ]; then
    S3SP=$(free_port)
    mkdir -p "$DIR/s3data-tls"
    node "$S3JS" -d "$DIR/s3data-tls" -a 127.0.0.1 -p "$S3SP" -s --key "$DIR/srv.key" --cert "$DIR/srv.pem" \
      --configure-bucket bkt > "$DIR/logs/s3rver-tls.log" 2>&1 &
    started $! s3rver-tls
  fi
  wait_port "$S3P" || { echo "s3rver did not start: $(tail -3 "$DIR/logs/s3rver.log")"; exit 1; }
  # upload DIR/s3/* into bucket bkt (signed with s3rver's built-in key), in
  # one curl: one connection, not a process and a connection per file (52
  # files took 4-8 s on a loaded machine); each transfer's status is checked
  keys=(); up=()
  while IFS= read -r f; do
    keys+=("${f#"$DIR/s3/"}")
    up+=(-o /dev/null -T "$f" "http://127.0.0.1:$S3P/bkt/${f#"$DIR/s3/"}")
  done < <(find -L "$DIR/s3" -type f | sort)
  if [ ${#keys[@]} -gt 0 ]; then
    codes=($(curl -s --max-time 30 -w '%{http_code}\n' --aws-sigv4 "aws:amz:us-east-1:s3" -u S3RVER:S3RVER \
      -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' "${up[@]}"))
    for i in "${!keys[@]}"; do
      [ "${codes[$i]:-none}" = 200 ] || { echo "s3rver: upload of ${keys[$i]} failed (HTTP ${codes[$i]:-none})"; exit 1; }
    done
  fi
  echo "S3=http://127.0.0.1:$S3P" >> "$DIR/env"
  if [ -f "$DIR/srv.pem" ]; then
    wait_port "$S3SP" || { echo "s3rver (TLS) did not start: $(tail -3 "$DIR/logs/s3rver-tls.log")"; exit 1; }
    f=$(find -L "$DIR/s3" -type f | sort | head -1)
    if [ -n "$f" ]; then
      code=$(curl -s --max-time 30 -o /dev/null -w '%{http_code}' --cacert "$DIR/ca.pem" --aws-sigv4 "aws:amz:us-east-1:s3" \
        -u S3RVER:S3RVER -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' -T "$f" "https://127.0.0.1:$S3SP/bkt/${f#"$DIR/s3/"}")
      [ "$code" = 200 ] || { echo "s3rver (TLS): upload failed (HTTP $code)"; exit 1; }
    fi
    echo "S3TLS=https://127.0.0.1:$S3SP" >> "$DIR/env"
  fi
fi

# ---- fault server --------------------------------------------------------------
if [[ " $want " == *" fault "* ]]; then
  FP=$(free_port)
  /usr/bin/python3 "$REPO/tools/httpfault.py" "$DIR/www" "$FP" > "$DIR/logs/fault.log" 2>&1 &
  started $! fault
  wait_port "$FP" || { echo "httpfault did not start: $(tail -3 "$DIR/logs/fault.log")"; exit 1; }
  echo "FAULT=http://127.0.0.1:$FP" >> "$DIR/env"
fi

# ---- first-byte latency for nginx's /delayed/ ----------------------------------------
if [[ " $want " == *" delay "* ]]; then
  /usr/bin/python3 "$REPO/tools/delayhdr.py" "$DP" "$DELAY_MS" "$DIR/www" "$RATE" > "$DIR/logs/delay.log" 2>&1 &
  started $! delay
  wait_port "$DP" || { echo "delayhdr did not start: $(tail -3 "$DIR/logs/delay.log")"; exit 1; }
  echo "DELAY=http://127.0.0.1:$HP/delayed" >> "$DIR/env"
fi

# ---- watchdog: stop everything when the owner goes (bounded by its life) ----------
(
  trap '' HUP
  while kill -0 "$OWNER" 2>/dev/null && [ -f "$DIR/env" ]; do sleep 1; done
  rm -f "$DIR/watchdog.pid"
  bash "$REPO/tests/remote/servers.sh" stop "$DIR" >/dev/null 2>&1
) > /dev/null 2>&1 < /dev/null &
echo $! > "$DIR/watchdog.pid"
exit 0
