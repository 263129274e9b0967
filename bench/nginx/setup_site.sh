#!/usr/bin/env bash
# bench/nginx/setup_site.sh DIR PORT SRC: a site for nginx under DIR that exercises what a web server
# spends its own code on: static files (small and large), gzip of text, and a reverse proxy
# (port PORT proxies /api/ to a second server block on PORT+1). One master and one worker
# process, in the foreground (as `hottext ab --server-*` and `hottext record` want), access log on.
# Writes DIR/conf/nginx.conf, DIR/html/*, and DIR/load.sh (the request-count load: N requests of
# each kind with ab, then one line "requests: TOTAL" for `ab --metric`).
# SRC is the nginx source tree (for its conf/mime.types).
set -euo pipefail
dir=$1 port=$2 src=$3
mkdir -p "$dir/conf" "$dir/html/api" "$dir/logs"
cp "$src/conf/mime.types" "$dir/conf/"
cat >"$dir/conf/nginx.conf" <<CONF
worker_processes 1;
daemon off;
error_log $dir/logs/error.log warn;
pid $dir/logs/nginx-$port.pid;
events { worker_connections 1024; }
http {
    include mime.types;
    access_log $dir/logs/access.log;
    sendfile on;
    keepalive_requests 100000;
    gzip on;
    gzip_types text/plain text/css application/json;
    gzip_min_length 256;
    upstream backend { server 127.0.0.1:$((port + 1)); keepalive 16; }
    server {
        listen 127.0.0.1:$port;
        root $dir/html;
        location /api/ {
            proxy_pass http://backend;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }
    }
    server {
        listen 127.0.0.1:$((port + 1));
        root $dir/html;
    }
}
CONF
printf '<html><body>hello</body></html>\n' >"$dir/html/index.html"
python3 - "$dir/html" <<'PY'
import random, sys
random.seed(7)
words = [''.join(random.choice('abcdefghij') for _ in range(random.randint(2, 9))) for _ in range(500)]
text = ' '.join(random.choice(words) for _ in range(20000)) + '\n'
open(sys.argv[1] + '/big.txt', 'w').write(text)
open(sys.argv[1] + '/api/items.json', 'w').write('[' + ','.join('{"id":%d,"name":"%s"}' % (i, random.choice(words)) for i in range(300)) + ']\n')
PY
cat >"$dir/load.sh" <<LOAD
#!/usr/bin/env bash
# N requests of each kind (static small, gzip text, proxied JSON): a fixed amount of work.
set -euo pipefail
n=\${1:-2000}
total=0
start=\$(date +%s.%N)
for url in / /big.txt /api/items.json; do
    out=\$(ab -q -k -c 4 -n "\$n" -H 'Accept-Encoding: gzip' "http://127.0.0.1:$port\$url")
    failed=\$(echo "\$out" | sed -n 's/^Failed requests: *//p')
    [ "\$failed" = 0 ] || { echo "load: \$failed failed requests for \$url" >&2; exit 1; }
    echo "\$out" | grep '^Requests per second'
    total=\$((total + n))
done
echo "requests: \$total"
awk -v n="\$total" -v t0="\$start" -v t1="\$(date +%s.%N)" 'BEGIN { printf "requests/s: %.1f\\n", n / (t1 - t0) }'
LOAD
chmod +x "$dir/load.sh"
