import Testing
import TimerdProtocol

/// `JSONObjectWriter` promises the bytes `Payload.encode` writes for the same flat object.
@Suite struct JSONObjectWriterTests {
    struct Flat: Encodable {
        var a: String
        var b: Int?
        var c: String?
        var d: String?

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(a, forKey: .a)
            try container.encodeIfPresent(b, forKey: .b)
            try container.encode(c, forKey: .c)
            try container.encodeIfPresent(d, forKey: .d)
        }

        enum CodingKeys: String, CodingKey { case a, b, c, d }
    }

    @Test(arguments: [
        "plain", "", "quote \" and backslash \\", "slash / stays", "new\nline\r\ttab", "ctl \u{01}\u{08}\u{0C}\u{1F}",
        "del \u{7F}", "héllo wörld ✓ 日本語 🎉", "\u{2028}\u{2029}",
    ])
    func writesWhatPayloadWrites(text: String) {
        for (number, other) in [(nil, nil), (-42, "x\"y"), (7, text)] as [(Int?, String?)] {
            var writer = JSONObjectWriter()
            writer.string("a", text)
            writer.integer("b", number)
            if let other { writer.string("c", other) } else { writer.null("c") }
            writer.string("d", other)
            #expect(writer.finish() == Payload.encode(Flat(a: text, b: number, c: other, d: other)), "\(text)")
        }
    }
}

/// `WatchEvent.json` is what the encoder writes for every field set or absent, lateness as a double.
@Suite struct WatchEventJSONTests {
    @Test(arguments: [0.0, 0.001, 1.5, 12.345678, 1e-7, 123_456_789.5, -0.25])
    func everyFieldAsTheEncoderWritesIt(lateness: Double) {
        let events = [
            WatchEvent(at: "2026-12-01T23:14:07.012758Z", event: "fired", job: "b498", scheduled_at: "2026-12-01T23:14:07Z",
                       lateness_ms: lateness),
            WatchEvent(at: "t", event: "finished", job: "j/\"x\"", run: 12, result: "failed", exit_code: 3, http_status: 503,
                       reason: "exited with status 3\nand a \u{01} control"),
            WatchEvent(at: "t", event: "clock", reason: "set back; now 2026-12-01T00:00:00Z"),
            WatchEvent(at: "t", event: "started", job: "日本語", run: 1),
        ]
        for event in events {
            #expect(event.json == Payload.encode(event))
        }
    }
}
