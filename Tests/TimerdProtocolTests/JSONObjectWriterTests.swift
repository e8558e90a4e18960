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
