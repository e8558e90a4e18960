import Foundation
import Glibc
import Testing
import TimerdSystem

/// Webhook jobs (`webhook=URL`) and failure/recovery notifications, through the real daemon and a real
/// HTTP(S) server (`webhook_server.py`, see ``WebhookServer``). Written against the spec of issue #4.
@Suite struct WebhookTests {
    // MARK: - Helpers

    /// `word` in single quotes, for a request line (no `'` inside).
    static func q(_ word: String) -> String { "'\(word)'" }

    /// Waits until job `name` has finished at least `runs` runs (none going on) and returns its `SHOW`.
    @discardableResult
    static func waitFinished(_ daemon: Daemon, _ name: String, runs: Int = 1, timeout: Double = 15) throws -> [String: Any] {
        var info: [String: Any] = [:]
        try eventually(timeout: timeout, "\(name): \(runs) run(s) finished") {
            info = try daemon.show(name)
            let started = info["runs"] as? Int ?? 0, running = info["running"] as? Int ?? 0
            return started - running >= runs && info["last_result"] is String
        }
        return info
    }

    /// RFC 3339 in UTC with microseconds, as timerd writes times: `2026-11-29T16:00:05.000000Z`.
    static func isMicroTimestamp(_ value: Any?) -> Bool {
        guard let text = value as? String else { return false }
        return text.wholeMatch(of: #/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z/#) != nil
    }

    /// The test process's CLOCK_MONOTONIC in seconds: the clock of the server's `mono` field.
    static func monotonicSeconds() -> Double {
        Double(SystemClock.monotonicNow()) / 1_000_000_000
    }

    static func reason(_ info: [String: Any]) -> String {
        info["last_reason"] as? String ?? ""
    }

    // MARK: - Success, method, headers, body

    @Test func aWebhookPostsTheDefaultJSONBody() throws {
        let server = try WebhookServer(script: ["/hook": [.status(200, body: "hello from the server")]])
        let daemon = try Daemon()
        #expect(try daemon.request("ADD hook in=10ms meta=team=ops webhook=\(Self.q(server.url("/hook")))") == "OK")
        let request = try #require(server.waitForRequests("/hook").first)
        #expect(request.method == "POST")
        #expect(request.headers["content-type"] == "application/json")
        let body = try #require(request.json(), "not a JSON object: \(request.body)")
        #expect(Set(body.keys) == ["fired_at", "job", "meta", "run", "scheduled_at"])
        #expect(body["job"] as? String == "hook")
        #expect(body["run"] as? Int == 1)
        #expect(body["meta"] as? [String: String] == ["team": "ops"])
        #expect(Self.isMicroTimestamp(body["scheduled_at"]), "scheduled_at: \(body["scheduled_at"] ?? "none")")
        #expect(Self.isMicroTimestamp(body["fired_at"]), "fired_at: \(body["fired_at"] ?? "none")")
        if let scheduled = body["scheduled_at"] as? String, let fired = body["fired_at"] as? String {
            #expect(try seconds(fired) >= seconds(scheduled))
            #expect(try seconds(fired) - seconds(scheduled) < 5)
        }
        // Keys are sorted in the text itself.
        let positions = ["\"fired_at\":", "\"job\":", "\"meta\":", "\"run\":", "\"scheduled_at\":"]
            .compactMap { request.body.range(of: $0)?.lowerBound }
        #expect(positions.count == 5 && positions == positions.sorted(), "keys not sorted: \(request.body)")

        let info = try Self.waitFinished(daemon, "hook")
        #expect(info["last_result"] as? String == "ok")
        #expect(info["last_http_status"] as? Int == 200)
        #expect(info["last_exit_code"] is NSNull)
        #expect(Self.reason(info).contains("200"), "last_reason: \(Self.reason(info))")
        #expect(info["last_output"] as? String == "hello from the server")
        #expect(info["runs"] as? Int == 1)
        #expect(server.requests("/hook").count == 1)
    }

    @Test func watchFinishedEventsCarryTheHTTPStatus() throws {
        // The reply takes 200 ms: the watcher, registered asynchronously in far less, sees the run end.
        let server = try WebhookServer(script: ["/slow": [.status(201, delay: 0.2)]])
        let daemon = try Daemon()
        let watcher = try Client(path: daemon.socket)
        #expect(try watcher.request("WATCH") == #"OK {"watching":"all"}"#)
        #expect(try daemon.request("ADD w in=10ms webhook=\(Self.q(server.url("/slow")))") == "OK")
        var finished: [String: Any] = [:]
        while finished.isEmpty {
            let event = try JSONSerialization.jsonObject(with: Data(try watcher.readLine().utf8)) as? [String: Any] ?? [:]
            if event["event"] as? String == "finished", event["job"] as? String == "w" { finished = event }
        }
        #expect(finished["result"] as? String == "ok")
        #expect(finished["http_status"] as? Int == 201)
    }

    @Test func customMethodHeadersAndBodyPlaceholders() throws {
        let server = try WebhookServer()
        let daemon = try Daemon()
        let template = #"{"j":"{job}","r":{run},"s":"{scheduled_at}","f":"{fired_at}","m":"{meta.team}","lit":"{{job}"}"#
        #expect(try daemon.request(
            "ADD custom in=10ms method=put meta=team=ops header='X-One: 1' header='X-Two: two words' "
                + "content_type=text/plain body=\(Self.q(template)) webhook=\(Self.q(server.url("/custom")))") == "OK")
        let request = try #require(server.waitForRequests("/custom").first)
        #expect(request.method == "PUT")
        #expect(request.headers["x-one"] == "1")
        #expect(request.headers["x-two"] == "two words")
        #expect(request.headers["content-type"] == "text/plain")
        // Placeholders are replaced as they are; other braces are text, and `{{` is a literal `{`.
        let body = try #require(request.json(), "not JSON: \(request.body)")
        let scheduled = try #require(body["s"] as? String), fired = try #require(body["f"] as? String)
        #expect(Self.isMicroTimestamp(scheduled) && Self.isMicroTimestamp(fired))
        #expect(request.body == #"{"j":"custom","r":1,"s":"\#(scheduled)","f":"\#(fired)","m":"ops","lit":"{job}"}"#)
        #expect(try daemon.options("custom").contains("method=PUT"), "method is stored upper-case")
        #expect(try Self.waitFinished(daemon, "custom")["last_result"] as? String == "ok")
    }

    @Test func getHeadDeleteAndAContentTypeHeader() throws {
        let server = try WebhookServer()
        let daemon = try Daemon()
        #expect(try daemon.request("ADD get in=10ms method=get webhook=\(Self.q(server.url("/get")))") == "OK")
        #expect(try daemon.request("ADD head in=10ms method=HEAD webhook=\(Self.q(server.url("/head")))") == "OK")
        #expect(try daemon.request("ADD del in=10ms method=delete webhook=\(Self.q(server.url("/del")))") == "OK")
        #expect(try daemon.request(
            "ADD ct in=10ms header='Content-Type: application/x-custom' body=hi webhook=\(Self.q(server.url("/ct")))") == "OK")

        let get = try #require(server.waitForRequests("/get").first)
        #expect(get.method == "GET")
        #expect(get.body == "")
        #expect(get.headers["content-type"] == nil, "no body, no Content-Type")

        let head = try #require(server.waitForRequests("/head").first)
        #expect(head.method == "HEAD")
        #expect(head.body == "")

        // DELETE without `body` sends the default JSON object.
        let delete = try #require(server.waitForRequests("/del").first)
        #expect(delete.method == "DELETE")
        #expect(delete.json()?["job"] as? String == "del")
        #expect(delete.headers["content-type"] == "application/json")

        // A Content-Type header replaces content_type's default (it is not sent twice).
        let custom = try #require(server.waitForRequests("/ct").first)
        #expect(custom.method == "POST")
        #expect(custom.body == "hi")
        #expect(custom.headers["content-type"] == "application/x-custom")

        for name in ["get", "head", "del", "ct"] {
            let info = try Self.waitFinished(daemon, name)
            #expect(info["last_result"] as? String == "ok", "\(name): \(Self.reason(info))")
            #expect(info["last_http_status"] as? Int == 200)
        }
    }

    // MARK: - Status, retries, expect

    @Test func serverErrorsAreRetriedWithGrowingBackoff() throws {
        let server = try WebhookServer(script: ["/down": [.status(503, body: "down")]])
        let daemon = try Daemon()
        #expect(try daemon.request("ADD retry in=10ms retries=3 retry_backoff=200ms webhook=\(Self.q(server.url("/down")))") == "OK")
        server.waitForRequests("/down", count: 4)
        let info = try Self.waitFinished(daemon, "retry")
        // The run is over: no fifth attempt can come.
        let attempts = server.requests("/down")
        #expect(attempts.count == 4, "1 attempt + 3 retries")
        #expect(info["last_result"] as? String == "failed")
        #expect(info["last_http_status"] as? Int == 503)
        #expect(info["last_exit_code"] is NSNull)
        #expect(Self.reason(info).contains("503"), "last_reason: \(Self.reason(info))")
        #expect(Self.reason(info).contains("retr"), "last_reason: \(Self.reason(info))")
        #expect(info["last_output"] as? String == "down")
        #expect(info["runs"] as? Int == 1, "one run lasts across its retries")
        // Before retry k timerd waits a random time in [d/2, d], d = 200ms·2^(k−1): each gap is at least d/2
        // (the wait starts after the previous answer), and not far above d.
        if attempts.count == 4 {
            let gaps = (1..<4).map { attempts[$0].mono - attempts[$0 - 1].mono }
            for (index, gap) in gaps.enumerated() {
                let d = 0.2 * Double(1 << index)
                #expect(gap >= d / 2, "gap before retry \(index + 1): \(gap)s < \(d / 2)s")
                #expect(gap < d + 2, "gap before retry \(index + 1): \(gap)s")
            }
        }
    }

    @Test func aRetryThatGetsThroughEndsOk() throws {
        let server = try WebhookServer(script: ["/flaky": [.status(503), .status(503), .status(200, body: "finally")]])
        let daemon = try Daemon()
        #expect(try daemon.request("ADD flaky in=10ms retries=3 retry_backoff=50ms webhook=\(Self.q(server.url("/flaky")))") == "OK")
        let info = try Self.waitFinished(daemon, "flaky")
        #expect(server.requests("/flaky").count == 3, "no retry after the success")
        #expect(info["last_result"] as? String == "ok")
        #expect(info["last_http_status"] as? Int == 200)
        #expect(info["last_output"] as? String == "finally")
        #expect(info["runs"] as? Int == 1)
    }

    @Test func expectDecidesWhichStatusesSucceed() throws {
        let server = try WebhookServer(script: ["/missing": [.status(404, body: "nope")]])
        let daemon = try Daemon()
        let url = Self.q(server.url("/missing"))
        #expect(try daemon.request("ADD plain in=10ms webhook=\(url)") == "OK")
        #expect(try daemon.request("ADD explicit in=10ms expect=2xx webhook=\(url)") == "OK")
        #expect(try daemon.request("ADD exact in=10ms expect=404 webhook=\(url)") == "OK")
        #expect(try daemon.request("ADD list in=10ms expect=204,400-404 webhook=\(url)") == "OK")
        #expect(try daemon.request("ADD other in=10ms expect=5xx webhook=\(url)") == "OK")
        let expected = ["plain": "failed", "explicit": "failed", "exact": "ok", "list": "ok", "other": "failed"]
        for (name, result) in expected {
            let info = try Self.waitFinished(daemon, name)
            #expect(info["last_result"] as? String == result, "\(name): \(Self.reason(info))")
            #expect(info["last_http_status"] as? Int == 404, "\(name)")
            #expect(Self.reason(info).contains("404"), "\(name): \(Self.reason(info))")
            #expect(info["last_output"] as? String == "nope")
        }
        // A 4xx is not retried by default (retries=0): one request per job.
        #expect(server.requests("/missing").count == 5)
    }

    // MARK: - Timeouts and connection errors

    @Test func aHangingServerTimesOutWhileOtherJobsKeepFiring() throws {
        let server = try WebhookServer(script: ["/stuck": [.hang]])
        let daemon = try Daemon()
        #expect(try daemon.request("ADD ticker every=100ms webhook=\(Self.q(server.url("/tick")))") == "OK")
        server.waitForRequests("/tick", count: 2)
        #expect(try daemon.request("ADD stuck in=10ms timeout=1s webhook=\(Self.q(server.url("/stuck")))") == "OK")
        let hung = try #require(server.waitForRequests("/stuck").first)
        let info = try Self.waitFinished(daemon, "stuck", timeout: 10)
        let ended = Self.monotonicSeconds()
        #expect(info["last_result"] as? String == "timeout")
        #expect(info["last_http_status"] is NSNull)
        #expect(Self.reason(info).contains("timed out"), "last_reason: \(Self.reason(info))")
        #expect(ended - hung.mono > 0.9, "the 1 s timeout ended the attempt after \(ended - hung.mono)s")
        #expect(ended - hung.mono < 5, "the 1 s timeout took \(ended - hung.mono)s")
        #expect(server.requests("/stuck").count == 1)
        // Meanwhile the ticker's webhook fired on time: about ten requests in that second, none far apart.
        let ticks = server.requests("/tick").map(\.mono).filter { $0 >= hung.mono - 0.15 && $0 <= ended }
        #expect(ticks.count >= 6, "ticks while the other request hung: \(ticks.count)")
        let gaps = zip(ticks.dropFirst(), ticks).map { $0 - $1 }
        #expect((gaps.max() ?? 0) < 0.5, "longest gap between ticks: \(gaps.max() ?? 0)s")
        #expect((try daemon.show("ticker")["last_result"] as? String) == "ok")
    }

    @Test func connectionRefusedFails() throws {
        let port = try unusedLoopbackPort()
        let daemon = try Daemon()
        #expect(try daemon.request("ADD refused in=10ms retries=1 retry_backoff=10ms webhook=http://127.0.0.1:\(port)/x") == "OK")
        let info = try Self.waitFinished(daemon, "refused")
        #expect(info["last_result"] as? String == "failed")
        #expect(info["last_http_status"] is NSNull)
        let reason = Self.reason(info).lowercased()
        #expect(reason.contains("connect") || reason.contains("refused"), "last_reason: \(reason)")
        #expect(reason.contains("retr"), "last_reason: \(reason)")
    }

    @Test func withoutLibcurlAWebhookFailsAndCommandsStillRun() throws {
        // The failpoint makes timerd load a library that does not exist, as on a host without libcurl4.
        let daemon = try Daemon(environment: ["TIMERD_TEST_FAILPOINTS": "no-libcurl"])
        #expect(try daemon.request("ADD hook in=10ms webhook=http://127.0.0.1:9/x") == "OK")
        let info = try Self.waitFinished(daemon, "hook")
        #expect(info["last_result"] as? String == "failed")
        #expect(Self.reason(info).contains("cannot load libcurl"), "last_reason: \(Self.reason(info))")
        #expect(try daemon.request("ADD cmd in=10ms command=true") == "OK")
        #expect(try Self.waitFinished(daemon, "cmd")["last_result"] as? String == "ok")
    }

    // MARK: - HTTPS

    @Test func httpsVerifiesTheServerAgainstCAFile() throws {
        let ca = try ThrowawayCA()
        let server = try WebhookServer(tls: ca)
        let daemon = try Daemon()
        #expect(try daemon.request(
            "ADD trusted in=10ms ca_file=\(Self.q(ca.caCertificate)) webhook=\(Self.q(server.url("/trusted")))") == "OK")
        #expect(try daemon.request("ADD untrusted in=10ms webhook=\(Self.q(server.url("/untrusted")))") == "OK")
        #expect(try daemon.request("ADD tls3 in=10ms insecure=yes webhook=\(Self.q(server.url("/insecure")))") == "OK")

        let trusted = try Self.waitFinished(daemon, "trusted")
        #expect(trusted["last_result"] as? String == "ok", "trusted: \(Self.reason(trusted))")
        #expect(trusted["last_http_status"] as? Int == 200)
        #expect(server.requests("/trusted").count == 1)

        let untrusted = try Self.waitFinished(daemon, "untrusted")
        #expect(untrusted["last_result"] as? String == "failed")
        #expect(untrusted["last_http_status"] is NSNull)
        let reason = Self.reason(untrusted).lowercased()
        #expect(reason.contains("tls") || reason.contains("certificate") || reason.contains("ssl"), "last_reason: \(reason)")
        #expect(server.requests("/untrusted").isEmpty, "no request went over an unverified connection")

        let insecure = try Self.waitFinished(daemon, "tls3")
        #expect(insecure["last_result"] as? String == "ok", "insecure: \(Self.reason(insecure))")
        #expect(insecure["last_http_status"] as? Int == 200)
        #expect(server.requests("/insecure").count == 1)
        // insecure=yes is logged as a warning when the job is added.
        eventually(timeout: 5, "a warning about tls3's insecure=yes") {
            daemon.log.split(separator: "\n").contains { line in
                line.contains("WARN") && line.contains("tls3")
                    && (line.lowercased().contains("insecure") || line.lowercased().contains("verif"))
            }
        }
    }

    // MARK: - Redirects

    @Test func redirectsAreFollowedOnlyWhenAllowed() throws {
        let server = try WebhookServer()
        try server.setScript([
            "/moved0": [.status(302, headers: ["Location": server.url("/target0")])],
            "/moved3": [.status(302, headers: ["Location": server.url("/target3")])],
            "/moved1": [.status(302, headers: ["Location": server.url("/target1")])],
            "/hop1": [.status(302, headers: ["Location": server.url("/hop2")])],
            "/hop2": [.status(302, headers: ["Location": server.url("/end")])],
            "/toftp": [.status(302, headers: ["Location": "ftp://127.0.0.1:\(server.port)/file"])],
        ])
        let daemon = try Daemon()
        #expect(try daemon.request("ADD r0 in=10ms webhook=\(Self.q(server.url("/moved0")))") == "OK")
        #expect(try daemon.request("ADD r0x in=10ms expect=3xx webhook=\(Self.q(server.url("/moved3")))") == "OK")
        #expect(try daemon.request("ADD r1 in=10ms redirects=1 webhook=\(Self.q(server.url("/moved1")))") == "OK")
        #expect(try daemon.request("ADD chain in=10ms redirects=1 webhook=\(Self.q(server.url("/hop1")))") == "OK")
        #expect(try daemon.request("ADD ftp in=10ms redirects=1 webhook=\(Self.q(server.url("/toftp")))") == "OK")

        // With redirects=0 (the default) the 302 is the response, judged by expect.
        let r0 = try Self.waitFinished(daemon, "r0")
        #expect(r0["last_result"] as? String == "failed")
        #expect(r0["last_http_status"] as? Int == 302)
        #expect(server.requests("/target0").isEmpty)
        let r0x = try Self.waitFinished(daemon, "r0x")
        #expect(r0x["last_result"] as? String == "ok")
        #expect(r0x["last_http_status"] as? Int == 302)
        #expect(server.requests("/target3").isEmpty)

        // With redirects=1 the target is reached and its answer counts.
        let r1 = try Self.waitFinished(daemon, "r1")
        #expect(r1["last_result"] as? String == "ok", "r1: \(Self.reason(r1))")
        #expect(r1["last_http_status"] as? Int == 200)
        #expect(server.requests("/target1").count == 1)

        // Two redirects in a row are one too many.
        let chain = try Self.waitFinished(daemon, "chain")
        #expect(chain["last_result"] as? String == "failed")
        #expect(server.requests("/hop2").count == 1)
        #expect(server.requests("/end").isEmpty)

        // Redirects go only to http and https.
        let ftp = try Self.waitFinished(daemon, "ftp")
        #expect(ftp["last_result"] as? String == "failed")
    }

    // MARK: - Concurrency

    @Test func twoHundredWebhooksInFlightNeedFewThreads() throws {
        let server = try WebhookServer(script: ["/slow": [.status(200, body: "done", delay: 0.5)]])
        // Room for all 200 runs at once (the default max_running is 64).
        let daemon = try Daemon(config: "[daemon]\nmax_running = 256\n")
        let pid = daemon.process.processIdentifier
        let client = try Client(path: daemon.socket)
        var lines = ""
        for index in 0..<200 { lines += "ADD c\(index) in=100ms webhook=\(Self.q(server.url("/slow")))\n" }
        try client.write(lines)
        for _ in 0..<200 { #expect(try client.readLine() == "OK") }

        // Sample the daemon's threads until every job has finished ok.
        var peakThreads = 0
        var allOk = false
        var lastList = Date.distantPast
        var results: [String: Int] = [:]
        let deadline = Date().addingTimeInterval(30)
        while !allOk && Date() < deadline {
            peakThreads = max(peakThreads, threadCount(of: pid))
            if Date().timeIntervalSince(lastList) > 0.1 {
                lastList = Date()
                let reply = try daemon.request("LIST")
                let jobs = try JSONSerialization.jsonObject(with: Data(reply.dropFirst(3).utf8)) as? [[String: Any]] ?? []
                results = [:]
                for job in jobs { results[job["last_result"] as? String ?? "none", default: 0] += 1 }
                allOk = results == ["ok": 200]
            }
            usleep(5_000)
        }
        #expect(allOk, "results: \(results)")
        #expect(peakThreads > 0 && peakThreads < 40, "timerd had up to \(peakThreads) threads")

        // They were in flight together: most requests arrived while the others still waited for their answer.
        let arrivals = server.requests("/slow").map(\.mono).sorted()
        #expect(arrivals.count == 200)
        var peakInFlight = 0, first = 0
        for (index, time) in arrivals.enumerated() {
            while arrivals[first] <= time - 0.5 { first += 1 }
            peakInFlight = max(peakInFlight, index - first + 1)
        }
        #expect(peakInFlight >= 100, "at most \(peakInFlight) requests were in flight at once")
    }

    // MARK: - Notifications

    @Test func failureAndRecoveryAreNotifiedOncePerTransition() throws {
        let server = try WebhookServer(script: [
            "/flaky": [.status(500, body: "boom 1"), .status(500, body: "boom 2"), .status(500, body: "boom 3"),
                       .status(200, body: "fine 4"), .status(200, body: "fine 5"), .status(500, body: "boom again")],
        ])
        let daemon = try Daemon()
        let notify = Self.q(server.url("/notify"))
        #expect(try daemon.request(
            "ADD flaky every=200ms webhook=\(Self.q(server.url("/flaky"))) on_failure=\(notify) on_recovery=\(notify)") == "OK")
        // Runs: 1 failed (→ failure), 2, 3 failed, 4 ok (→ recovery), 5 ok, 6 failed (→ failure), 7… failed.
        server.waitForRequests("/notify", count: 3, timeout: 20)
        try Self.waitFinished(daemon, "flaky", runs: 10, timeout: 20)
        #expect(try daemon.request("PAUSE flaky") == "OK")

        let requests = server.requests("/notify")
        #expect(requests.allSatisfy { $0.method == "POST" })
        let notes = requests.compactMap { $0.json() }.sorted { ($0["run"] as? Int ?? 0) < ($1["run"] as? Int ?? 0) }
        #expect(notes.count == requests.count, "every notification is a JSON object")
        #expect(notes.count == 3, "notifications: \(requests.map(\.body))")
        #expect(notes.map { $0["event"] as? String ?? "?" } == ["failure", "recovery", "failure"])
        #expect(notes.map { $0["run"] as? Int ?? 0 } == [1, 4, 6])
        guard notes.count == 3 else { return }
        for note in notes {
            #expect(Set(note.keys).isSuperset(of: [
                "event", "job", "run", "result", "exit_code", "http_status", "reason", "output", "finished_at",
            ]), "keys: \(note.keys.sorted())")
            #expect(note["job"] as? String == "flaky")
            #expect(note["exit_code"] is NSNull, "a webhook run has no exit code")
            #expect(Self.isMicroTimestamp(note["finished_at"]), "finished_at: \(note["finished_at"] ?? "none")")
        }
        #expect(notes[0]["result"] as? String == "failed")
        #expect(notes[0]["http_status"] as? Int == 500)
        #expect((notes[0]["reason"] as? String ?? "").contains("500"))
        #expect(notes[0]["output"] as? String == "boom 1")
        #expect(notes[1]["result"] as? String == "ok")
        #expect(notes[1]["http_status"] as? Int == 200)
        #expect((notes[1]["reason"] as? String ?? "").contains("200"))
        #expect(notes[1]["output"] as? String == "fine 4")
        #expect(notes[2]["result"] as? String == "failed")
        #expect(notes[2]["http_status"] as? Int == 500)
        #expect(notes[2]["output"] as? String == "boom again")
    }

    @Test func aCommandJobsTransitionsRunAShellCommand() throws {
        let daemon = try Daemon()
        try daemon.writeFile("notify.sh", #"""
            printf '%s %s %s %s [%s] %s %s\n' "$TIMERD_EVENT" "$TIMERD_RUN" "$TIMERD_RESULT" "$TIMERD_EXIT_CODE" \
                "$TIMERD_HTTP_STATUS" "$TIMERD_JOB" "$(printf %s "$TIMERD_OUTPUT_TAIL" | tr -d '\n')" >> "$DIR/events"
            [ -n "$TIMERD_REASON" ] || echo "no reason for run $TIMERD_RUN" >> "$DIR/events"

            """#)
        let notify = Self.q("sh \(daemon.directory)/notify.sh")
        // Runs 1, 2 and 4 fail; 3 and 5 onwards succeed.
        #expect(try daemon.request(
            "ADD cj every=100ms command='echo out$TIMERD_RUN; case $TIMERD_RUN in 1|2|4) exit 1;; esac' "
                + "on_failure=\(notify) on_recovery=\(notify)") == "OK")
        eventually(timeout: 15, "four notifications") { daemon.lines("events").count >= 4 }
        try Self.waitFinished(daemon, "cj", runs: 8, timeout: 15)
        #expect(try daemon.request("PAUSE cj") == "OK")
        let runOf = { (line: String) -> Int in line.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0 }
        let events = daemon.lines("events").sorted { runOf($0) < runOf($1) }
        #expect(events == [
            "failure 1 failed 1 [] cj out1",
            "recovery 3 ok 0 [] cj out3",
            "failure 4 failed 1 [] cj out4",
            "recovery 5 ok 0 [] cj out5",
        ])
    }

    @Test func aCommandJobsFailureIsPostedAsJSON() throws {
        let server = try WebhookServer()
        let daemon = try Daemon()
        #expect(try daemon.request(
            "ADD cf in=10ms command='echo bad news; exit 3' on_failure=\(Self.q(server.url("/notify")))") == "OK")
        let request = try #require(server.waitForRequests("/notify").first)
        #expect(request.method == "POST")
        let note = try #require(request.json(), "not JSON: \(request.body)")
        #expect(note["event"] as? String == "failure")
        #expect(note["job"] as? String == "cf")
        #expect(note["run"] as? Int == 1)
        #expect(note["result"] as? String == "failed")
        #expect(note["exit_code"] as? Int == 3)
        #expect(note["http_status"] is NSNull)
        #expect(!(note["reason"] as? String ?? "").isEmpty)
        #expect((note["output"] as? String ?? "").contains("bad news"))
        #expect(note["output_tail"] as? String == note["output"] as? String)
        #expect(Self.isMicroTimestamp(note["finished_at"]))
        // A command job's SHOW has the new field too, null.
        let info = try Self.waitFinished(daemon, "cf")
        #expect(info["last_http_status"] is NSNull)
        #expect(info["last_exit_code"] as? Int == 3)
    }

    // MARK: - Secrets

    @Test func secretsNeverReachTheLog() throws {
        let server = try WebhookServer(script: ["/p": [.status(500, body: "no")], "/hang": [.hang]])
        let refused = try unusedLoopbackPort()
        let daemon = try Daemon()
        let header = "header='Authorization: Bearer s3cret-token'"
        // An HTTP failure with a retry, a connection error, and a timeout: each logs its outcome.
        #expect(try daemon.request("ADD sec1 in=10ms retries=1 retry_backoff=10ms \(header) body=secret-body-xyz "
            + "webhook='http://user:pw@127.0.0.1:\(server.port)/p?token=abc'") == "OK")
        #expect(try daemon.request("ADD sec2 in=10ms \(header) webhook='http://user:pw@127.0.0.1:\(refused)/p?token=abc'") == "OK")
        #expect(try daemon.request("ADD sec3 in=10ms timeout=1s header='X-Api-Key: s3cret-token' "
            + "webhook='http://user:pw@127.0.0.1:\(server.port)/hang?token=abc'") == "OK")
        let expected = ["sec1": "failed", "sec2": "failed", "sec3": "timeout"]
        for (name, result) in expected {
            #expect(try Self.waitFinished(daemon, name)["last_result"] as? String == result, "\(name)")
        }
        // The secrets were really used.
        let received = server.requests("/p")
        #expect(received.count == 2)
        #expect(received.first?.path == "/p?token=abc")
        #expect(received.first?.headers["authorization"]?.contains("Bearer s3cret-token") == true)
        #expect(received.first?.body == "secret-body-xyz")
        #expect(server.requests("/hang").first?.headers["x-api-key"] == "s3cret-token")

        daemon.stop()
        let log = daemon.log
        #expect(log.contains("job=sec1"), "the runs were logged")
        for secret in ["s3cret-token", "pw@", "user:pw", "token=abc", "secret-body-xyz"] {
            #expect(!log.contains(secret), "the log contains \(secret):\n\(log)")
        }
    }

    // MARK: - Configuration surfaces

    @Test func aConfigFileWebhookJob() throws {
        let server = try WebhookServer()
        let daemon = try Daemon(config: """
            [job "cfg"]
            in = 10ms
            webhook = \(server.url("/cfg"))
            method = put
            header = X-Token: abc def
            body = {"job":"{job}","literal":"{{job}"}
            retries = 2
            retry_backoff = 10ms
            expect = 200-299
            timeout = 5s

            """)
        let request = try #require(server.waitForRequests("/cfg").first)
        #expect(request.method == "PUT")
        #expect(request.headers["x-token"] == "abc def")
        #expect(request.body == #"{"job":"cfg","literal":"{job}"}"#)
        #expect(try Self.waitFinished(daemon, "cfg")["last_result"] as? String == "ok")
    }

    @Test func checkConfigReportsWebhookMistakes() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/t.conf"
        try """
            [job "cmd"]
            every = 1h
            command = true
            method = GET

            [job "hook"]
            every = 1h
            webhook = http://127.0.0.1:1/x
            body = {nope}

            """.write(toFile: path, atomically: true, encoding: .utf8)
        let result = try Daemon.run(Daemon.binary("timerd"), ["--check-config", "--config", path])
        #expect(result.status == 1)
        let lines = result.stderr.split(separator: "\n")
        #expect(lines.contains { $0.contains("t.conf:4:") && $0.contains("webhook") }, "stderr: \(result.stderr)")
        #expect(lines.contains { $0.contains("t.conf:9:") }, "stderr: \(result.stderr)")
    }

    @Test func timerctlAddTakesTheWebhookFlags() throws {
        let server = try WebhookServer()
        let daemon = try Daemon()
        let added = try daemon.ctl(
            "add", "tc", "--in", "10ms", "--webhook", server.url("/tc"), "--method", "patch", "--header", "X-From: timerctl",
            "--body", "{job}", "--content-type", "text/plain", "--retries", "1", "--retry-backoff", "10ms",
            "--expect", "2xx", "--timeout", "5s", "--on-failure", server.url("/notify"))
        #expect(added.status == 0, "stderr: \(added.stderr)")
        let request = try #require(server.waitForRequests("/tc").first)
        #expect(request.method == "PATCH")
        #expect(request.headers["x-from"] == "timerctl")
        #expect(request.headers["content-type"] == "text/plain")
        #expect(request.body == "tc")
        #expect(try Self.waitFinished(daemon, "tc")["last_result"] as? String == "ok")
    }

    // MARK: - Bad input

    @Test func badWebhookOptionsAreRefused() throws {
        let daemon = try Daemon()
        let url = "http://127.0.0.1:9/x"
        let refusals: [String] = [
            "webhook=ftp://x",
            "webhook=not-a-url",
            "method=FETCH webhook=\(url)",
            "method=GET body=x webhook=\(url)",
            "method=HEAD body=x webhook=\(url)",
            "header=NoColon webhook=\(url)",
            "header='Bad Name: x' webhook=\(url)",
            #"header="X-A: a\nb" webhook="# + url,
            "body='{nope}' webhook=\(url)",
            "retries=11 webhook=\(url)",
            "retries=-1 webhook=\(url)",
            "redirects=11 webhook=\(url)",
            "expect=banana webhook=\(url)",
            "insecure=maybe webhook=\(url)",
            "ca_file=relative/ca.pem webhook=\(url)",
            "timeout=0s webhook=\(url)",
        ]
        for (index, options) in refusals.enumerated() {
            let reply = try daemon.request("ADD bad\(index) every=1h \(options)")
            #expect(reply.hasPrefix("ERR bad-argument "), "\(options) → \(reply)")
        }
        // Webhook-only keys on a command job name the reason.
        // (`retries` and `retry_backoff` are a command's too: each attempt a run, `WorkflowTests`.)
        for option in ["method=GET", "header='X: y'", "body=x", "content_type=text/plain",
                       "expect=2xx", "redirects=1", "ca_file=\(daemon.directory)/absent.conf", "insecure=yes"] {
            let reply = try daemon.request("ADD cmd every=1h command=true \(option)")
            #expect(reply.hasPrefix("ERR bad-argument "), "\(option) → \(reply)")
            #expect(reply.contains("webhook"), "\(option) → \(reply)")
        }
        // Exactly one action.
        #expect(try daemon.request("ADD two every=1h command=true webhook=\(url)").hasPrefix("ERR "))
        #expect(try daemon.request("ADD three every=1h webhook=\(url) -- /bin/true").hasPrefix("ERR "))
        // None of them was added.
        #expect(try daemon.listNames().isEmpty)

        // What is valid: method in any case (stored upper-case); notifications on any job.
        #expect(try daemon.request("ADD fine every=1h method=patch webhook=\(url)") == "OK")
        #expect(try daemon.options("fine").contains("method=PATCH"))
        #expect(try daemon.request("ADD notified every=1h command=true on_failure=true on_recovery='echo back'") == "OK")
        #expect(try daemon.request("ADD hooked every=1h webhook=\(url) on_failure=\(url)") == "OK")
    }
}
