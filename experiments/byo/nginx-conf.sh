#!/bin/sh
# Writes the nginx configuration of experiments/byo-nginx.toml: one worker, no logs, listening on
# HOST:PORT, answering /echo?size=1024 with 1024 bytes from memory (a static answer of the size
# archlab's /echo returns) and everything else with "ok". Temporary files stay in DIR.
# usage: nginx-conf.sh DIR HOST PORT
set -eu
dir=$1 host=$2 port=$3
body=$(head -c 1024 /dev/zero | tr '\0' x)
cat > "$dir/nginx.conf" <<CONF
worker_processes 1;
daemon off;
master_process on;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    keepalive_requests 1000000;
    client_body_temp_path $dir/client_body;
    proxy_temp_path $dir/proxy;
    fastcgi_temp_path $dir/fastcgi;
    uwsgi_temp_path $dir/uwsgi;
    scgi_temp_path $dir/scgi;
    default_type text/plain;
    server {
        listen $host:$port reuseport;
        location = /echo { return 200 "$body"; }
        location / { return 200 "ok\n"; }
    }
}
CONF
