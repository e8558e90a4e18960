import Testing
import TimerdProtocol

/// `JobInfo.appendJSON` and `JSONBytes` promise the bytes `Payload.encode` writes.
@Suite struct JobInfoJSONTests {
    static let texts = [
        "plain", "", "quote \" and backslash \\", "slash / stays", "new\nline\r\ttab", "ctl \u{01}\u{08}\u{0C}\u{1F}\u{00}",
        "del \u{7F}", "héllo wörld ✓ 日本語 🎉", "\u{2028}\u{2029}", "e\u{301}",
    ]

    static let numbers: [Double] = [
        0, -0.0, 1, -1, 0.5, 0.1, 1.25, 3.000001, 123_456.789, 1e-5, 1.5e-7, 4.2e15, 1e16, 1e21, 12_345_678_901_234_568,
        Double(Int64.max), 0.000123, 86_400_000, 2.2250738585072014e-308, .greatestFiniteMagnitude, 1.0 / 3.0,
    ]

    static func empty() -> JobInfo { JobInfo(name: "a", state: .scheduled, source: "runtime", schedule: "every 1h") }

    static func full(_ text: String, _ number: Double) -> JobInfo {
        var info = JobInfo(name: "job-\(text.count)", state: .paused, source: "config", schedule: "cron \(text)")
        info.declared_at = "/etc/timerd/\(text).conf:12"
        info.options = ["every=1h", "command=\(text)", "env=A=\(text)"]
        info.next_fire = "2026-03-29T01:00:00.000000Z"
        info.timezone = "Europe/Berlin"
        info.next_fire_local = "2026-03-29T03:00:00+02:00"
        info.dst_rules = "dst_gap=shift dst_repeat=first"
        info.runs = 12
        info.running = 1
        info.skipped = -3
        info.pending = 2
        info.last_run = 12
        info.last_started = "2026-03-29T00:00:00.000001Z"
        info.last_finished = "2026-03-29T00:00:01.000001Z"
        info.last_result = .timeout
        info.last_exit_code = -1
        info.last_signal = 15
        info.last_http_status = 503
        info.last_duration_ms = number
        info.last_lateness_ms = -number
        info.last_reason = text
        info.last_output = text + text
        info.last_skip = JobInfo.SkippedFire(at: "2026-03-29T00:00:00.000000Z", reason: text)
        info.owner = "pid:42"
        info.owner_uid = .max
        info.redacted = true
        info.tags = [text, "b"]
        info.modes = []
        info.held_since = "2026-03-29T00:00:00.500000Z"
        info.cluster = true
        info.node = text
        info.run_on = [text, "ssd"]
        return info
    }

    static func json(_ infos: [JobInfo]) -> String {
        var json = JSONBytes()
        json.raw("[")
        for (index, info) in infos.enumerated() {
            if index > 0 { json.raw(",") }
            info.appendJSON(to: &json)
        }
        json.raw("]")
        return String(decoding: json.bytes, as: UTF8.self)
    }

    @Test(arguments: texts)
    func everyFieldAsPayloadWritesIt(text: String) {
        for number in Self.numbers {
            let infos = [Self.full(text, number), Self.empty()]
            #expect(Self.json(infos) == Payload.encode(infos), "\(text) \(number)")
        }
    }

    @Test func numbersAsTheEncoderWritesThem() {
        for number in Self.numbers + Self.numbers.map({ -$0 }) + (0..<200).map({ Double($0) * 0.37 - 5 }) {
            var json = JSONBytes()
            json.number(number)
            #expect(String(decoding: json.bytes, as: UTF8.self) == Payload.encode(number), "\(number)")
        }
    }

    @Test func tagResultsAsPayloadWritesThem() {
        for jobs in [[], ["a"], Self.texts] {
            #expect(TagResult(jobs: jobs).json == Payload.encode(TagResult(jobs: jobs)))
        }
    }

    @Test func showsRecentRunsGoThroughTheEncoder() {
        var info = Self.full("x", 1.5)
        info.recent_runs = []
        #expect(Self.json([info]) == Payload.encode([info]))
    }
}
