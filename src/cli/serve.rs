//! `portico serve` and `portico stdio`: the MCP gateway over HTTP or stdin/stdout.
//! It wires library modules together; it never holds protocol logic.

use super::args::{OAuthArgs, ServeArgs, StdioArgs};
use super::common::{
    Exit, banner, finish, init_logging, load_config, load_webhook_key, refused, shutdown_signal,
    start_tracing,
};
use portico::app::Ops;
use portico::mcp::handler::ServerInfo;
use portico::mcp::http::HttpOptions;
use portico::ops::reload::Watch;
use std::process::ExitCode;

/// MCP authorization's settings from `--oauth-issuer` / `--oauth-resource`: issuers must be
/// https; `demo` also accepts a plain-http loopback issuer (with a warning).
pub(super) fn oauth_options(
    args: OAuthArgs,
    demo: bool,
) -> Result<portico::auth::resource::Options, String> {
    use portico::auth::resource::spec::issuer_ok;
    let mut allow_hosts = Vec::new();
    for i in &args.oauth_issuers {
        let loopback = url::Url::parse(i).ok().and_then(|u| {
            let h = u.host_str()?.trim_matches(['[', ']']).to_string();
            (u.scheme() == "http" && matches!(h.as_str(), "127.0.0.1" | "localhost" | "::1"))
                .then_some(h)
        });
        match loopback {
            Some(h) if demo => {
                tracing::warn!(issuer = %i, "a plain-http loopback issuer is accepted for the demo only; `portico serve` refuses it");
                eprintln!("warning: --oauth-issuer {i}: plain http, accepted for the demo only");
                allow_hosts.push(h);
            }
            _ => issuer_ok(i, &[]).map_err(|e| format!("--oauth-issuer: {e}"))?,
        }
    }
    if let Some(r) = &args.oauth_resource {
        let ok = url::Url::parse(r)
            .is_ok_and(|u| matches!(u.scheme(), "http" | "https") && u.fragment().is_none());
        if !ok {
            return Err(format!(
                "--oauth-resource: `{r}` is not an absolute http(s) URI without a fragment"
            ));
        }
    }
    Ok(portico::auth::resource::Options {
        issuers: args.oauth_issuers,
        resource: args.oauth_resource,
        allow_hosts,
        leeway: 60,
    })
}

/// Runs `portico serve`.
pub async fn serve(args: ServeArgs) -> ExitCode {
    let ServeArgs {
        config,
        listen,
        allowed_hosts,
        allowed_origins,
        max_body_bytes,
        admin_addr,
        shutdown_timeout,
        shards,
        reload_interval,
        log_format,
        keep_startup_code,
        server_name,
        webhook_key,
        webhook_journal,
        state,
        state_prefix,
        idempotency_bytes,
        webhook_replay,
        webhook_dedupe_window,
        webhook_latest,
        sessions,
        tls,
        tls_client_ca,
        limits,
        otlp_endpoint,
        oauth,
    } = args;
    let oauth = match refused(oauth_options(oauth, false)) {
        Ok(o) => o,
        Err(code) => return code.into(),
    };
    portico::idempotency::set_budget(idempotency_bytes);
    let stop_signal = shutdown_signal();
    let config = config.all();
    let otel = match start_tracing(log_format, otlp_endpoint.as_deref()) {
        Ok(o) => o,
        Err(code) => return code.into(),
    };
    if let Some(url) = state {
        match portico::state::Shared::new(&url, &state_prefix) {
            Ok(s) => {
                tracing::info!(redis = %s.display, "shared state in redis");
                portico::state::install(s);
                if let Some(shared) = portico::state::shared() {
                    // Identity bindings, proof jti, issued credentials and nonces too.
                    portico::auth::store::install(portico::state::auth::stores(shared));
                }
            }
            Err(e) => {
                eprintln!("--state: {e}");
                return Exit::Invalid.into();
            }
        }
    }
    let tls = match refused(tls.load(tls_client_ca.as_deref())) {
        Ok(t) => t,
        Err(code) => return code.into(),
    };
    let webhook_key = match refused(webhook_key.map(|p| load_webhook_key(&p)).transpose()) {
        Ok(k) => k,
        Err(code) => return code.into(),
    };
    let Some(gateway) = load_config(&config) else {
        return Exit::Invalid.into();
    };
    let mut opts = HttpOptions {
        max_body_bytes,
        shutdown_timeout,
        webhook_key,
        webhook_journal,
        webhook_retention: portico::webhook::ingress::Retention {
            replay: webhook_replay as usize,
            dedupe: webhook_dedupe_window,
            latest: webhook_latest,
        },
        tls,
        limits: limits.limits(),
        oauth,
        ..HttpOptions::default()
    };
    sessions.apply(&mut opts);
    if let Some(n) = shards {
        opts.shards = n;
    }
    let mut admin_opts = portico::ops::admin::AdminOptions {
        limits: limits.limits(),
        ..Default::default()
    };
    admin_opts
        .allowed_hosts
        .extend(allowed_hosts.iter().cloned());
    opts.allowed_hosts.extend(allowed_hosts);
    opts.allowed_origins.extend(allowed_origins);
    let mut ops = Ops {
        admin: admin_addr,
        watch: Some(Watch {
            paths: config,
            interval: reload_interval.0,
            sighup: true,
        }),
        ..Ops::default()
    };
    ops.admin_opts = admin_opts;
    let info = ServerInfo {
        name: server_name,
        ..ServerInfo::default()
    };
    let running = match portico::app::start_with(gateway, listen, opts, info, ops).await {
        Ok(r) => r,
        Err(e) => {
            let admin = admin_addr.map(|a| format!(" or {a}")).unwrap_or_default();
            eprintln!("cannot listen on {listen}{admin}: {e}");
            return Exit::Startup.into();
        }
    };
    // Before the `mcp:` line: whoever waits for it meets the resident set requests keep.
    if !keep_startup_code {
        portico::ops::resident::enable();
        let released = portico::ops::resident::release_code();
        tracing::debug!(released_kib = released / 1024, "startup code unmapped");
    }
    println!("mcp: {}", running.mcp_url());
    if let Some(admin) = running.admin_url() {
        println!("admin: {admin}");
    }
    let mut endpoints = vec![("mcp", running.mcp_url())];
    let base = running.mcp_url();
    let base = base.trim_end_matches(&running.server.opts.path);
    endpoints.push(("webhooks", format!("{base}/webhooks/{{business}}")));
    if let Some(admin) = running.admin_url() {
        endpoints.push(("admin", admin));
    }
    banner(&endpoints, &running.server.core.gateway.load());
    stop_signal.await;
    tracing::info!("shutting down");
    finish(running.stop().await, otel).await
}

/// Runs `portico stdio`.
pub async fn stdio(args: StdioArgs) -> ExitCode {
    let StdioArgs {
        config,
        server_name,
        webhook_listen,
        webhook_key,
        limits,
    } = args;
    init_logging();
    let webhook_key = match refused(webhook_key.map(|p| load_webhook_key(&p)).transpose()) {
        Ok(k) => k,
        Err(code) => return code.into(),
    };
    let Some(gateway) = load_config(&config.all()) else {
        return Exit::Invalid.into();
    };
    let mut endpoints = vec![("stdio", "stdin/stdout".to_string())];
    let core = std::sync::Arc::new(portico::mcp::handler::Core {
        gateway: arc_swap::ArcSwap::from_pointee(gateway),
        info: ServerInfo {
            name: server_name,
            ..ServerInfo::default()
        },
    });
    let max_depth = HttpOptions::default().max_depth;
    let mut hub = None;
    if let Some(addr) = webhook_listen {
        let listener = match portico::util::listen::bind(addr) {
            Ok(l) => l,
            Err(e) => {
                eprintln!("--webhook-listen {addr}: {e}");
                return Exit::Startup.into();
            }
        };
        let ingress = std::sync::Arc::new(portico::webhook::ingress::Ingress::with_key(
            webhook_key,
            None,
        ));
        hub = Some(ingress.hub.clone());
        // stdout carries JSON-RPC only: the address goes to stderr.
        if let Ok(a) = listener.local_addr() {
            eprintln!("webhooks: http://{a}/webhooks/");
            endpoints.push(("webhooks", format!("http://{a}/webhooks/{{business}}")));
        }
        tokio::spawn(portico::webhook::listener::serve(
            listener,
            ingress,
            core.clone(),
            HttpOptions::default().max_body_bytes,
            limits.limits(),
        ));
    }
    banner(&endpoints, &core.gateway.load());
    match portico::mcp::stdio::serve_with_events(
        core,
        tokio::io::stdin(),
        tokio::io::stdout(),
        max_depth,
        hub,
    )
    .await
    {
        Ok(()) => Exit::Ok.into(),
        Err(e) => {
            eprintln!("stdio error: {e}");
            Exit::Runtime.into()
        }
    }
}
