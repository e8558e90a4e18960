import Testing
@testable import TimerdCore

@Suite("ExecRequest")
struct ExecRequestTests {
    static let job = name("exec-1")

    static func spec(_ options: [KeyValue], argv: [String]? = ["/bin/true"]) throws(TimerdError) -> JobSpec {
        try ExecRequest.spec(name: job, options: options, argv: argv)
    }

    static let mapping: [(options: [KeyValue], schedule: Schedule, overlap: OverlapPolicy)] = [
        ([], .after(delay: .zero), .queue),
        (opts(("start", "5s")), .after(delay: .seconds(5)), .queue),
        (opts(("repeats", "no")), .after(delay: .zero), .queue),
        (opts(("repeats", "no"), ("start", "2m")), .after(delay: .seconds(120)), .queue),
        (opts(("async", "yes")), .after(delay: .zero), .allow),
        (opts(("async", "no")), .after(delay: .zero), .queue),
        (opts(("repeats", "yes"), ("interval", "1m")), .every(interval: .seconds(60), start: .zero), .queue),
        (opts(("interval", "1m"), ("repeats", "yes")), .every(interval: .seconds(60), start: .zero), .queue),
        (opts(("repeats", "yes"), ("interval", "1m"), ("start", "10s")), .every(interval: .seconds(60), start: .seconds(10)), .queue),
        (opts(("start", "10s"), ("async", "yes"), ("interval", "10ms"), ("repeats", "yes")),
         .every(interval: .milliseconds(10), start: .seconds(10)), .allow),
        (opts(("repeats", "yes"), ("async", "no"), ("interval", "1h")), .every(interval: .seconds(3_600), start: .zero), .queue),
    ]

    @Test("interval without repeats=yes is an error, not silently ignored")
    func intervalNeedsRepeats() {
        #expect(throws: TimerdError(.badArgument, "")) { try Self.spec(opts(("interval", "1m"), ("start", "3s"))) }
        #expect(throws: TimerdError(.badArgument, "")) { try Self.spec(opts(("interval", "1m"), ("repeats", "no"))) }
    }

    @Test("start/interval/repeats/async map onto schedule and overlap", arguments: mapping)
    func maps(options: [KeyValue], schedule: Schedule, overlap: OverlapPolicy) throws {
        let spec = try Self.spec(options)
        #expect(spec.schedule == schedule)
        #expect(spec.overlap == overlap)
        #expect(spec.action == .argv(["/bin/true"]))
        #expect(spec.name == Self.job)
    }

    @Test("the mapped spec equals the equivalent ADD spec")
    func sameAsAdd() throws {
        let exec = try Self.spec(opts(("repeats", "yes"), ("interval", "5s"), ("start", "1s"), ("async", "yes"), ("timeout", "3s")))
        let add = try JobSpec(
            name: Self.job, options: opts(("every", "5s"), ("start", "1s"), ("overlap", "allow"), ("timeout", "3s")),
            argv: ["/bin/true"])
        #expect(exec == add)
    }

    @Test("boolean spellings", arguments: [
        ("yes", true), ("true", true), ("on", true), ("1", true), ("YES", true), ("True", true), ("On", true),
        ("no", false), ("false", false), ("off", false), ("0", false), ("NO", false), ("False", false), ("OFF", false),
    ])
    func bools(text: String, value: Bool) throws {
        #expect(try ExecRequest.parseBool(text, key: "k") == value)
        let spec = try Self.spec(opts(("async", text)))
        #expect(spec.overlap == (value ? .allow : .queue))
        let repeating = try Self.spec(value ? opts(("repeats", text), ("interval", "1s")) : opts(("repeats", text)))
        #expect(repeating.schedule.repeats == value)
    }

    @Test("bad boolean spellings", arguments: ["", "y", "n", "2", "yess", "enable", " yes", "yes ", "-1", "nope"])
    func badBools(text: String) {
        for key in ["repeats", "async"] {
            expectError(.badArgument, key: key, mentions: ["\(key): expected yes or no, got \"\(text)\""]) {
                try Self.spec(opts((key, text)))
            }
        }
    }

    @Test("schedule keys and overlap are not EXEC options", arguments: ["every", "in", "at", "overlap"])
    func forbidden(key: String) {
        expectError(.badArgument, key: key, mentions: ["\(key) is not an EXEC option"]) {
            try Self.spec(opts((key, "1s")))
        }
        expectError(.badArgument, key: key) { try Self.spec(opts(("repeats", "yes"), ("interval", "1s"), (key, "skip"))) }
    }

    @Test("repeats=yes needs an interval")
    func intervalRequired() {
        expectError(.missingArgument, key: "interval", mentions: ["interval=DUR"]) { try Self.spec(opts(("repeats", "yes"))) }
        expectError(.missingArgument, key: "interval") { try Self.spec(opts(("repeats", "yes"), ("start", "1s"))) }
    }

    @Test("other job keys pass through unchanged")
    func passThrough() throws {
        let spec = try Self.spec(
            opts(("repeats", "yes"), ("interval", "1s"), ("count", "4"), ("leeway", "5ms"), ("timeout", "2s"),
                 ("kill_grace", "1s"), ("env", "A=1"), ("meta", "who=me"), ("cwd", "/tmp")),
            argv: ["/bin/true"])
        #expect(spec.count == 4)
        #expect(spec.leeway == .milliseconds(5))
        #expect(spec.timeout == .seconds(2))
        #expect(spec.killGrace == .seconds(1))
        #expect(spec.env == [KeyValue("A", "1")])
        #expect(spec.meta == [KeyValue("who", "me")])
        #expect(spec.cwd == "/tmp")
        let shell = try Self.spec(opts(("command", "echo hi")), argv: nil)
        #expect(shell.action == .shell("echo hi"))
    }

    @Test("job validation still applies to passed-through and mapped keys", arguments: [
        (opts(("count", "2")), "count"),  // count needs repeats=yes
        (opts(("bogus", "1")), "bogus"),
        (opts(("cwd", "rel")), "cwd"),
        (opts(("timeout", "0s")), "timeout"),
        (opts(("command", "x")), "command"),  // plus the argv: two actions
        (opts(("repeats", "yes"), ("interval", "1s"), ("start", "later")), "start"),
    ])
    func validation(options: [KeyValue], key: String) {
        expectError(.badArgument, key: key) { try Self.spec(options) }
    }

    @Test("no action is missing-argument")
    func noAction() {
        expectError(.missingArgument, key: .some(nil), mentions: ["action is required"]) { try Self.spec([], argv: nil) }
    }

    @Test("EXEC keys")
    func keys() {
        #expect(ExecRequest.keys == ["start", "interval", "repeats", "async"])
        #expect(Set(ExecRequest.keys).isDisjoint(with: ["every", "in", "at", "overlap"]))
    }

    /// With repeats=no, `start=` is rewritten to `in=` and JobSpec reports the error against `in`, a key the
    /// client never sent; likewise `interval=` becomes `every=`. The error should name the EXEC key.
    @Test("errors name the EXEC key the client sent", arguments: [
        (opts(("start", "soon")), "start"),
        (opts(("repeats", "no"), ("start", "-1s")), "start"),
        (opts(("repeats", "yes"), ("interval", "often")), "interval"),
        (opts(("repeats", "yes"), ("interval", "1ms")), "interval"),
    ])
    func errorKeys(options: [KeyValue], key: String) {
        expectError(.badArgument, key: key) { try Self.spec(options) }
    }

    /// JobSpec rejects a non-repeatable key given twice, but EXEC's own keys silently keep the last value.
    @Test("EXEC keys given twice are rejected", arguments: [
        opts(("start", "1s"), ("start", "2s")),
        opts(("repeats", "yes"), ("interval", "1s"), ("interval", "2s")),
        opts(("repeats", "yes"), ("repeats", "no"), ("interval", "1s")),
        opts(("async", "yes"), ("async", "no")),
    ])
    func duplicates(options: [KeyValue]) {
        let key = options.last(where: { key in options.filter { $0.key == key.key }.count > 1 })!.key
        expectError(.badArgument, key: key, mentions: ["more than once"]) { try Self.spec(options) }
    }
}
