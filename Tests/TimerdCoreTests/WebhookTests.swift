import Testing
@testable import TimerdCore

@Suite struct WebhookSpecTests {
    static func spec(_ options: [KeyValue]) throws(TimerdError) -> JobSpec {
        try JobSpec(name: name("hook"), options: opts(("every", "1m")) + options)
    }

    @Test("every webhook key is read and written back")
    func roundTrip() throws {
        let options = opts(
            ("webhook", "https://user:pw@hooks.example:8443/p?token=abc"), ("method", "put"),
            ("header", "Authorization:   Bearer x"), ("header", "X-Id: {job}"), ("body", "{\"j\":\"{job}\",\"o\":\"{meta.owner}\"}"),
            ("content_type", "text/plain"), ("expect", "2XX, 304"), ("retries", "3"), ("retry_backoff", "250ms"),
            ("redirects", "2"), ("ca_file", "/etc/ca.pem"), ("insecure", "no"), ("meta", "owner=ops"),
            ("on_failure", "https://alerts.example/x"), ("on_recovery", "echo back"))
        let spec = try Self.spec(options)
        guard case .webhook(let hook) = spec.action else { Issue.record("not a webhook"); return }
        #expect(hook.method == "PUT")
        #expect(hook.headers == ["Authorization: Bearer x", "X-Id: {job}"])
        #expect(hook.expect.description == "2xx,304")
        #expect(hook.expect.contains(204) && hook.expect.contains(304) && !hook.expect.contains(302))
        #expect(hook.retries == 3 && hook.retryBackoff == .milliseconds(250) && hook.redirects == 2)
        #expect(spec.onFailure == .url("https://alerts.example/x"))
        #expect(spec.onRecovery == .command("echo back"))
        #expect(spec.action.summary == "PUT https://hooks.example:8443/p", "no user:password or query in logs")
        // Written back canonically, and read back to the same spec.
        #expect(try JobSpec(name: spec.name, options: spec.options) == spec)
        #expect(spec.options.contains(KeyValue("method", "PUT")))
        #expect(!spec.options.contains { $0.key == "insecure" }, "the default is not written")
    }

    @Test("rejected with the key at fault", arguments: [
        (opts(("webhook", "ftp://x/")), "webhook", "http:// or https://"),
        (opts(("webhook", "http://")), "webhook", "no host"),
        (opts(("webhook", "http://a b/")), "webhook", "space"),
        (opts(("webhook", "http://x/"), ("method", "FETCH")), "method", "FETCH"),
        (opts(("webhook", "http://x/"), ("method", "GET"), ("body", "x")), "body", "no body"),
        (opts(("webhook", "http://x/"), ("body", "{nope}")), "body", "unknown placeholder {nope}"),
        (opts(("webhook", "http://x/"), ("body", "{meta.missing}")), "body", "{meta.missing}"),
        (opts(("webhook", "http://x/"), ("header", "NoColon")), "header", "Name: value"),
        (opts(("webhook", "http://x/"), ("header", "Bad Name: v")), "header", "invalid name"),
        (opts(("webhook", "http://x/"), ("header", "X: a\r\nY: b")), "header", "line break"),
        (opts(("webhook", "http://x/"), ("retries", "11")), "retries", "0 to 10"),
        (opts(("webhook", "http://x/"), ("retry_backoff", "10min")), "retry_backoff", "at most"),
        (opts(("webhook", "http://x/"), ("expect", "2xx,abc")), "expect", "abc"),
        (opts(("webhook", "http://x/"), ("expect", "299-200")), "expect", "299-200"),
        (opts(("webhook", "http://x/"), ("ca_file", "/ca.pem")), "ca_file", "https://"),
        (opts(("webhook", "https://x/"), ("ca_file", "ca.pem")), "ca_file", "absolute"),
        (opts(("webhook", "https://x/"), ("insecure", "maybe")), "insecure", "yes or no"),
        (opts(("command", "true"), ("method", "GET")), "method", "only to webhook= jobs"),
        (opts(("command", "true"), ("header", "X: y")), "header", "only to webhook= jobs"),
        (opts(("command", "true"), ("webhook", "http://x/")), "command", "only one action"),
        (opts(("command", "true"), ("on_failure", "ftp://x")), nil, nil),
        (opts(("command", "true"), ("on_failure", "https://")), "on_failure", "no host"),
        (opts(("command", "true"), ("on_recovery", " ")), "on_recovery", "URL or a shell command"),
    ] as [([KeyValue], String?, String?)])
    func rejected(options: [KeyValue], key: String?, mentions: String?) {
        guard let key, let mentions else {
            // Not a URL scheme timerd sends to: it is a shell command, which is valid.
            #expect(throws: Never.self) { try Self.spec(options) }
            return
        }
        expectError(.badArgument, key: .some(key), mentions: [mentions]) { try Self.spec(options) }
    }

    @Test func bodyPlaceholders() throws {
        let text = try Webhook.render(#"{"job":"{job}","run":{run},"m":{"k":"{meta.k}"},"lit":"{{job}","x":"{ y }"}"#) { name in
            ["job": "a", "run": "7", "meta.k": "v"][name]
        }
        #expect(text == #"{"job":"a","run":7,"m":{"k":"v"},"lit":"{job}","x":"{ y }"}"#)
    }

    @Test func redaction() {
        #expect(Webhook.redact("https://u:p@h:1/a/b?c=d#e") == "https://h:1/a/b")
        #expect(Webhook.redact("http://h") == "http://h")
        #expect(Webhook.redact("http://h?x=1") == "http://h")
    }
}
