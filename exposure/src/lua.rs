//! The identity filter of Gardener's istio-ingress chart, one Lua script
//! for every listener that ends TLS: the API's (both forms) and the
//! apiserver-proxy's internal listener (`http_proxy`).

use super::{AUTHENTICATED_HOST_KEY, REQUEST_HEADER_GROUP, REQUEST_HEADER_USER};

/// Sets who the client is from its certificate, as Gardener's istio-ingress
/// chart's EnvoyFilter does for TLS termination: headers a client sends
/// itself are dropped; with a client certificate, its common name becomes
/// the user and its organisations the groups, and the request is marked
/// for the mutual-TLS route; every request gets a day as its upstream
/// timeout (long-running watches and exec sessions).
pub fn lua_source() -> String {
    lua_source_for(AUTHENTICATED_HOST_KEY, "info:requestedServerName()")
}

/// The same filter with its own metadata: a request with a client
/// certificate gets `key` set to the Lua expression `value` (the API's
/// listener: the server name it asked for; the apiserver-proxy's internal
/// listener: the shoot's namespace, as sni.go's EnvoyFilter sets it).
pub fn lua_source_for(key: &str, value: &str) -> String {
    format!(
        r#"function envoy_on_request(handle)
  local headers = handle:headers()
  headers:remove("{user}")
  headers:remove("{group}")
  local info = handle:streamInfo()
  local conn = info:downstreamSslConnection()
  if conn ~= nil and conn:peerCertificatePresented() then
    local subject = conn:parsedSubjectPeerCertificate()
    if subject ~= nil then
      local cn = subject:commonName()
      if cn == nil or cn == "" then
        handle:respond({{[":status"] = "400"}}, "client certificate without a common name")
        return
      end
      info:dynamicMetadata():set("envoy.filters.http.lua", "{key}", {value})
      headers:add("{user}", cn)
      for _, org in ipairs(subject:organizationName()) do
        if org ~= "" then
          headers:add("{group}", org)
        end
      end
    end
  end
  headers:add("x-envoy-upstream-rq-timeout-ms", "86400000")
  headers:add("x-envoy-upstream-rq-per-try-timeout-ms", "86400000")
end
"#,
        user = REQUEST_HEADER_USER,
        group = REQUEST_HEADER_GROUP,
    )
}
