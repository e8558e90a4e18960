import Testing
import TimerdCore
import TimerdProtocol

@Suite("Request parsing and encoding")
struct RequestTests {
    // MARK: verbs

    @Test("every verb parses in any ASCII case", arguments: Verb.allCases)
    func verbCaseInsensitive(verb: Verb) throws {
        let raw = verb.rawValue
        let mixed = String(raw.enumerated().map { $0.offset % 2 == 0 ? Character($0.element.lowercased()) : $0.element })
        for spelling in [raw, raw.lowercased(), mixed, "'\(raw.lowercased())'"] {
            #expect(try Request.parse(spelling) == Request(verb: verb), "spelling \(spelling)")
        }
        #expect(Verb(word: raw) == verb)
    }

    @Test("verb list is the documented one")
    func verbList() {
        #expect(Verb.allCases.map(\.rawValue) == [
            "PING", "VERSION", "HELP", "ADD", "EXEC", "CANCEL", "PAUSE", "RESUME", "RUN", "LIST", "SHOW", "RELOAD", "MODE", "STATS", "WATCH", "NEXT", "HISTORY",
            "CLUSTER", "WHY",
        ])
    }

    @Test("unknown verbs", arguments: ["FOO", "pıng", "PİNG", "PINGS", "PIN", "''", "name=x", "-- PING", "\"\u{301}\""])
    func unknownVerb(line: String) {
        let error = caught { try Request.parse(line) }
        #expect(error?.code == .unknownVerb)
    }

    @Test("unknown verb message names the verb, shortened when huge")
    func unknownVerbMessage() {
        #expect(caught { try Request.parse("frobnicate x") }?.message.contains("frobnicate") == true)
        #expect(caught { try Request.parse("'two words'") }?.message.contains("'two words'") == true)
        let huge = caught { try Request.parse(String(repeating: "Q", count: 10_000)) }
        #expect(huge?.code == .unknownVerb)
        #expect((huge?.message.utf8.count ?? .max) < 200)
        // A verb containing a newline does not put a raw newline in the message.
        let newline = caught { try Request.parse(#""a\nb""#) }
        #expect(newline?.message.contains("\n") == false)
    }

    @Test("empty or blank lines", arguments: ["", " ", "\t \t", "\r", "\n", "\r\n", "  \r"])
    func emptyRequest(line: String) {
        let error = caught { try Request.parse(line) }
        #expect(error?.code == .missingArgument)
        #expect(error?.message == "empty request")
        #expect(caught { try Request.parse(line: Array(line.utf8)) }?.code == .missingArgument)
    }

    @Test("bad quoting in requests", arguments: ["ADD 'x", "ADD \"x", "ADD x\\", "'PING", "ADD name=\"a b"])
    func badQuoting(line: String) {
        #expect(caught { try Request.parse(line) }?.code == .badQuoting)
    }

    static let invalidUTF8: [[UInt8]] = [
        [0xFF],
        Array("PING ".utf8) + [0xC3],  // truncated 2-byte sequence
        Array("ADD ".utf8) + [0xC0, 0x80],  // overlong NUL
        Array("ADD ".utf8) + [0xED, 0xA0, 0x80],  // UTF-16 surrogate
        Array("ADD '".utf8) + [0x80] + Array("'".utf8),  // lone continuation byte, even inside quotes
        Array("ADD x".utf8) + [0xF4, 0x90, 0x80, 0x80],  // beyond U+10FFFF
        Array("'unterminated ".utf8) + [0xFE],  // encoding is checked before quoting
    ]

    @Test("invalid UTF-8", arguments: invalidUTF8)
    func badEncoding(bytes: [UInt8]) {
        #expect(caught { try Request.parse(line: bytes) }?.code == .badEncoding)
    }

    @Test("byte and string entry points agree")
    func bytesEntryPoint() throws {
        let line = "add 日本 name='e\u{301} x' -- sh -c 'echo \"$1\"'"
        let viaBytes = try Request.parse(line: Array(line.utf8))
        let viaString = try Request.parse(line)
        #expect(utf8(viaBytes) == utf8(viaString))
        #expect(viaBytes.positionals == ["日本"])
        #expect(viaBytes.argv == ["sh", "-c", "echo \"$1\""])
    }

    @Test("trailing CR / line terminator is stripped")
    func trailingCR() throws {
        #expect(try Request.parse("PING\r") == Request(verb: .ping))
        #expect(try Request.parse("PING\r\n") == Request(verb: .ping))
        #expect(try Request.parse(line: Array("SHOW a\r".utf8)) == Request(verb: .show, positionals: ["a"]))
        // Only the trailing one: an inner CR is data.
        #expect(try Request.parse("SHOW a\rb").positionals == ["a\rb"])
        // A quoted CR at the end is kept.
        #expect(try Request.parse("SHOW 'a\r'").positionals == ["a\r"])
    }

    // MARK: options, positionals, --

    @Test("options and positionals")
    func optionsAndPositionals() throws {
        let r = try Request.parse("ADD backup every=5m command=\"tar czf /b.tgz /etc\" extra name= x=a=b")
        #expect(r.verb == .add)
        #expect(r.positionals == ["backup", "extra"])
        #expect(r.options == [
            Option(key: "every", value: "5m"),
            Option(key: "command", value: "tar czf /b.tgz /etc"),
            Option(key: "name", value: ""),
            Option(key: "x", value: "a=b"),
        ])
        #expect(r.argv == nil)
    }

    @Test("repeatable keys: values in order, value is last")
    func repeatedKeys() throws {
        let r = try Request.parse("ADD env=A=1 env=B=2 name=a name=b Env=C")
        #expect(r.values("env") == ["A=1", "B=2"])
        #expect(r.value("env") == "B=2")
        #expect(r.value("name") == "b")
        #expect(r.values("Env") == ["C"])  // keys are case-sensitive
        #expect(r.value("missing") == nil)
        #expect(r.values("missing") == [])
    }

    static let keyShapes: [(word: String, option: Option?)] = [
        ("a=1", Option(key: "a", value: "1")),
        ("_=1", Option(key: "_", value: "1")),
        ("_x9=", Option(key: "_x9", value: "")),
        ("A_b_C=--", Option(key: "A_b_C", value: "--")),
        ("k=''", Option(key: "k", value: "")),
        ("k='a b'", Option(key: "k", value: "a b")),
        ("k=\"a\\nb\"", Option(key: "k", value: "a\nb")),
        ("k==", Option(key: "k", value: "=")),
        ("9a=1", nil),
        ("-a=1", nil),
        ("a-b=1", nil),
        ("a.b=1", nil),
        ("=x", nil),
        ("é=1", nil),
        ("'a=b'", nil),
        ("a'=b'", nil),
        ("\"a\"=b", nil),
        ("a\\=b", nil),
        ("\\a=b", nil),
        ("''a=b", nil),
        ("a", nil),
    ]

    @Test("which words are options", arguments: keyShapes)
    func optionShapes(word: String, option: Option?) throws {
        let r = try Request.parse("ADD " + word)
        if let option {
            #expect(r.options == [option])
            #expect(r.positionals == [])
        } else {
            #expect(r.options == [])
            #expect(r.positionals.count == 1)
        }
    }

    @Test("-- ends options")
    func doubleDash() throws {
        let r = try Request.parse("EXEC job name=x -- env A=1 -- 'x y' '' ")
        #expect(r.positionals == ["job"])
        #expect(r.options == [Option(key: "name", value: "x")])
        #expect(r.argv == ["env", "A=1", "--", "x y", ""])

        #expect(try Request.parse("EXEC --").argv == [])
        #expect(try Request.parse("EXEC -- ").argv == [])
        #expect(try Request.parse("EXEC").argv == nil)
        #expect(try Request.parse("EXEC -- --").argv == ["--"])
    }

    @Test("quoted or partial -- is an ordinary word", arguments: ["'--'", "\"--\"", "-\\-", "\\--", "'-'-", "--x", "---", "-"])
    func notDoubleDash(word: String) throws {
        let r = try Request.parse("EXEC \(word) a=1")
        #expect(r.argv == nil)
        #expect(r.positionals.count == 1)
        #expect(r.options == [Option(key: "a", value: "1")])
    }

    // MARK: encoding

    @Test("encode layout and quoting")
    func encodeLayout() {
        let r = Request(
            verb: .add,
            positionals: ["a b", "", "--", "k=v", "plain"],
            options: [Option(key: "name", value: "x y"), Option(key: "e", value: ""), Option(key: "c", value: "it's")],
            argv: ["--", "A=1", "sh"]
        )
        #expect(r.encode() == #"ADD 'a b' '' '--' 'k=v' plain name='x y' e= c="it's" -- '--' 'A=1' sh"#)
        #expect(r.description == r.encode())
        #expect(Request(verb: .ping).encode() == "PING")
        #expect(Request(verb: .exec, argv: []).encode() == "EXEC --")
        #expect(Option(key: "k", value: "a b").description == "k='a b'")
    }

    @Test("an option with an invalid key is sent as a positional word")
    func invalidKey() throws {
        let r = Request(verb: .add, options: [Option(key: "bad key", value: "v")])
        let back = try Request.parse(r.encode())
        #expect(back.options == [])
        #expect(back.positionals == ["bad key=v"])
        #expect(!Option.isValidKey("bad key"))
        #expect(Option.isValidKey("_ok9"))
        #expect(!Option.isValidKey(""))
        #expect(!Option.isValidKey("9"))
    }

    static let tricky: [Request] = [
        Request(verb: .ping),
        Request(verb: .exec, argv: []),
        Request(verb: .exec, argv: [""]),
        Request(verb: .exec, argv: ["--", "--"]),
        Request(verb: .add, positionals: ["", "", ""]),
        Request(verb: .add, positionals: ["--", "-", "'--'", "a=b", "=", "a="]),
        Request(verb: .add, positionals: ["'", "\"", "\\", "'\"\\", "\\n", "\n", "\t", "\r", "\r\n", " "]),
        Request(verb: .add, positionals: ["\u{301}", "'\u{301}", "e\u{301}", "é", "\u{301}'"]),
        Request(verb: .add, options: [Option(key: "k", value: "'\u{301}\"\u{301}")]),
        Request(verb: .add, options: [Option(key: "env", value: "A=1"), Option(key: "env", value: "B=2")]),
        Request(verb: .add, options: [Option(key: "k", value: "")]),
        Request(verb: .add, options: [Option(key: "k", value: "--")]),
        Request(verb: .add, options: [Option(key: "k", value: "x\ny\r\n\tz")]),
        Request(verb: .add, options: [Option(key: "k", value: "a=b c")]),
        Request(verb: .add, positionals: ["PING"], options: [Option(key: "_", value: "'")], argv: ["a=b", "'", ""]),
        Request(verb: .list, positionals: ["\u{0}", "\u{7F}", "\u{85}", "\u{A0}", "\u{2028}", "👍🏽🇫🇷"]),
        Request(verb: .reload, positionals: ["a\r"], argv: ["b\r"]),
        Request(verb: .show, positionals: [String(repeating: "'\"\\ ", count: 200)]),
    ]

    @Test("encode → parse round trip (table)", arguments: tricky)
    func roundTripTable(request: Request) throws {
        let line = request.encode()
        #expect(!line.utf8.contains(UInt8(ascii: "\n")))
        #expect(line.utf8.last != UInt8(ascii: "\r"))
        #expect(try utf8(Request.parse(line)) == utf8(request), "line: \(line.debugDescription)")
        #expect(try utf8(Request.parse(line: Array(line.utf8))) == utf8(request))
    }

    @Test("encode → parse round trip (generated, fixed seeds)", arguments: [1, 42, 0xDEAD_BEEF] as [UInt64])
    func roundTripGenerated(seed: UInt64) throws {
        var rng = Xorshift(seed: seed)
        for _ in 0..<1500 {
            let request = randomRequest(&rng)
            let line = request.encode()
            #expect(!line.utf8.contains(UInt8(ascii: "\n")))
            let back = try Request.parse(line)
            #expect(utf8(back) == utf8(request), "line: \(line.debugDescription)")
            // Re-encoding is stable.
            #expect(Array(back.encode().utf8) == Array(line.utf8))
        }
    }

    @Test("many encoded requests framed, drip-fed and parsed come back in order")
    func throughFramer() throws {
        var rng = Xorshift(seed: 7)
        let requests = (0..<300).map { _ in randomRequest(&rng) }
        let stream = requests.map { Array(($0.encode() + (Bool.random(using: &rng) ? "\r\n" : "\n")).utf8) }.joined()
        let bytes = Array(stream)
        var framer = LineFramer()
        var lines: [FramedLine] = []
        var i = 0
        while i < bytes.count {
            let n = min(bytes.count - i, Int.random(in: 1...97, using: &rng))
            lines += framer.append(bytes[i..<(i + n)])
            i += n
        }
        #expect(framer.finish() == nil)
        try #require(lines.count == requests.count)
        for (line, request) in zip(lines, requests) {
            guard case .line(let l) = line else {
                Issue.record("unexpected \(line)")
                continue
            }
            #expect(try utf8(Request.parse(line: l)) == utf8(request))
        }
    }
}

func randomRequest(_ rng: inout Xorshift) -> Request {
    Request(
        verb: Verb.allCases.randomElement(using: &rng)!,
        positionals: (0..<Int.random(in: 0...4, using: &rng)).map { _ in randomWord(&rng) },
        options: (0..<Int.random(in: 0...3, using: &rng)).map { _ in
            Option(key: randomKey(&rng), value: randomWord(&rng))
        },
        argv: Bool.random(using: &rng) ? nil : (0..<Int.random(in: 0...4, using: &rng)).map { _ in randomWord(&rng) }
    )
}
