import Testing
import TimerdCore
import TimerdProtocol

@Suite("Reply encoding and parsing")
struct ReplyTests {
    static let encodeTable: [(reply: Reply, line: String)] = [
        (.ok(nil), "OK"),
        (.ok(""), "OK "),
        (.ok(#"{"jobs":[]}"#), #"OK {"jobs":[]}"#),
        (.ok("{\n  \"a\": 1\r\n}"), #"OK {   "a": 1  }"#),
        (.err(code: "no-such-job", message: "no job named backup"), "ERR no-such-job no job named backup"),
        (.err(code: "busy", message: ""), "ERR busy"),
        (.err(code: "bad-argument", message: "line one\nline two\r\nline three\r"), "ERR bad-argument line one line two  line three "),
        (.err(code: "x1-2y", message: " leading space"), "ERR x1-2y  leading space"),
    ]

    @Test("encode table", arguments: encodeTable)
    func encode(reply: Reply, line: String) {
        #expect(Array(reply.encode().utf8) == Array(line.utf8))
        #expect(reply.description == reply.encode())
    }

    @Test("appendLine writes the encoded line and a newline", arguments: encodeTable)
    func appendLine(reply: Reply, line: String) {
        var bytes = Array("before\n".utf8)
        reply.appendLine(to: &bytes)
        #expect(bytes == Array("before\n\(line)\n".utf8))
    }

    @Test("encoded replies are always one line")
    func singleLine() {
        for reply: Reply in [.ok("a\nb"), .ok("\r"), .err(code: "internal", message: "\n\n\r\r\n"), .err(code: "x", message: "a\r\nb")] {
            let line = reply.encode()
            #expect(!line.utf8.contains(UInt8(ascii: "\n")))
            #expect(!line.utf8.contains(UInt8(ascii: "\r")))
        }
    }

    @Test("from TimerdError", arguments: TimerdError.Code.allCases)
    func fromError(code: TimerdError.Code) throws {
        let reply = Reply(TimerdError(code, "something about \(code)\nsecond line", key: "k"))
        #expect(reply == .err(code: code.rawValue, message: "something about \(code)\nsecond line"))
        #expect(reply.errorCode == code)
        #expect(!reply.isOK)
        #expect(Reply.isValidCode(code.rawValue))
        let back = try Reply.parse(reply.encode())
        #expect(back == .err(code: code.rawValue, message: "something about \(code) second line"))
        #expect(back.errorCode == code)
    }

    static let parseTable: [(line: String, reply: Reply)] = [
        ("OK", .ok(nil)),
        ("OK ", .ok("")),
        ("OK x y ", .ok("x y ")),
        ("OK  two", .ok(" two")),
        ("OK \u{301}x", .ok("\u{301}x")),  // combining mark right after the separator
        (#"OK {"a":"b c"}"#, .ok(#"{"a":"b c"}"#)),
        ("OK\r", .ok(nil)),
        ("OK x\r\n", .ok("x")),
        ("ERR busy", .err(code: "busy", message: "")),
        ("ERR busy ", .err(code: "busy", message: "")),
        ("ERR bad-argument some message", .err(code: "bad-argument", message: "some message")),
        ("ERR future-code-v2  two spaces", .err(code: "future-code-v2", message: " two spaces")),
        ("ERR x \u{301}", .err(code: "x", message: "\u{301}")),
        ("ERR 42 numeric", .err(code: "42", message: "numeric")),
    ]

    @Test("parse table", arguments: parseTable)
    func parse(line: String, reply: Reply) throws {
        let parsed = try Reply.parse(line)
        #expect(parsed == reply)
        if case .ok(let a?) = parsed, case .ok(let b?) = reply { #expect(Array(a.utf8) == Array(b.utf8)) }
        if case .err(_, let a) = parsed, case .err(_, let b) = reply { #expect(Array(a.utf8) == Array(b.utf8)) }
        #expect(try Reply.parse(line: Array(line.utf8)) == reply)
    }

    static let garbage: [String] = [
        "", " ", "ok", "Ok", "OKAY", "OK\tx", " OK", "ERR", "ERR ", "ERR  x", "ERR Bad-Code x", "ERR -x m",
        "ERR x- m", "ERR a--b m", "ERR a_b m", "ERR é m", "ERROR x", "HELLO", "PING", "ERR\tbusy",
    ]

    @Test("garbage replies", arguments: garbage)
    func garbageReplies(line: String) {
        let error = caught { try Reply.parse(line) }
        #expect(error?.code == .badArgument)
    }

    @Test("invalid UTF-8 reply")
    func badEncoding() {
        #expect(caught { try Reply.parse(line: Array("OK ".utf8) + [0xFF]) }?.code == .badEncoding)
        #expect(caught { try Reply.parse(line: Array("OK".utf8)) } == nil)
    }

    @Test("round trips, including multi-line messages")
    func roundTrips() throws {
        var rng = Xorshift(seed: 99)
        let codes = TimerdError.Code.allCases.map(\.rawValue) + ["some-newer-code", "x", "a1-b2-c3"]
        for _ in 0..<2000 {
            let text = (0..<Int.random(in: 0...6, using: &rng)).map { _ in randomWord(&rng) }.joined(separator: " ")
            let expected = String(String.UnicodeScalarView(text.unicodeScalars.map { $0 == "\n" || $0 == "\r" ? " " : $0 }))
            let reply: Reply
            let want: Reply
            switch Int.random(in: 0...2, using: &rng) {
            case 0:
                reply = .ok(nil)
                want = reply
            case 1:
                reply = .ok(text)
                want = .ok(expected)
            default:
                let code = codes.randomElement(using: &rng)!
                reply = .err(code: code, message: text)
                // Messages also escape other control characters (see ReplyEscapeTests).
                var escaped = ""
                for scalar in expected.unicodeScalars {
                    if (scalar.value < 0x20 && scalar != "\t") || scalar.value == 0x7F {
                        let hex = String(scalar.value, radix: 16, uppercase: true)
                        escaped += "\\x" + (hex.count == 1 ? "0" + hex : hex)
                    } else {
                        escaped.unicodeScalars.append(scalar)
                    }
                }
                want = .err(code: code, message: escaped)
            }
            let back = try Reply.parse(reply.encode())
            #expect(back == want, "line: \(reply.encode().debugDescription)")
            #expect(Array(back.encode().utf8) == Array(reply.encode().utf8))
        }
    }

    @Test("invalid codes are not sent as is")
    func invalidCode() throws {
        for bad in ["", "Bad", "has space", "a\nb", "-x"] {
            let line = Reply.err(code: bad, message: "msg").encode()
            let back = try Reply.parse(line)
            #expect(back.errorCode == .internal)
            if case .err(_, let message) = back { #expect(message.hasSuffix(": msg")) }
            #expect(!line.utf8.contains(UInt8(ascii: "\n")))
        }
    }

    @Test("unknown codes stay raw")
    func unknownCode() throws {
        let r = try Reply.parse("ERR from-the-future details")
        #expect(r == .err(code: "from-the-future", message: "details"))
        #expect(r.errorCode == nil)
        #expect(Reply.ok(nil).errorCode == nil)
        #expect(Reply.ok("x").isOK)
    }
}
