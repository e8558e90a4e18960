import Foundation
import Testing
@testable import TimerdCore

/// Cross-checks `CalendarSpec` against the real thing: `systemd-analyze calendar` (systemd 252) on this
/// machine, for a few hundred specs (systemd.time(7)'s examples plus seeded random ones covering every
/// syntax element, valid and not), in UTC and in zones with unusual DST rules, from base times around
/// their transitions. Compares acceptance, the normalised form and the next five elapses. Skipped where
/// systemd-analyze is not installed.
@Suite struct CalendarOracleTests {
    static let analyze: String? = ["/usr/bin/systemd-analyze", "/bin/systemd-analyze"]
        .first { FileManager.default.isExecutableFile(atPath: $0) }
    static let iterations = 5

    /// The examples of systemd.time(7) and other hand-picked specs.
    static let handPicked = [
        "Sat,Thu,Mon..Wed,Sat..Sun", "Mon,Sun 12-*-* 2,1:23", "Wed *-1", "Wed..Wed,Wed *-1", "Wed, 17:48",
        "Wed..Sat,Tue 12-10-15 1:2:3", "*-*-7 0:0:0", "10-15", "monday *-12-* 17:00", "Mon,Fri *-*-3,1,2 *:30:45",
        "12,14,13,12:20,10,30", "12..14:10,20,30", "mon,fri *-1/2-1,3 *:30:45", "03-05 08:05:40", "08:05:40",
        "05:40", "Sat,Sun 12-05 08:05:40", "Sat,Sun 08:05:40", "2003-03-05 05:40", "05:40:23.4200004/3.1700005",
        "2003-02..04-05", "2003-03-05 05:40 UTC", "2003-03-05", "03-05", "hourly", "daily", "daily UTC",
        "monthly", "weekly", "weekly Pacific/Auckland", "yearly", "annually", "*:2/3", "minutely", "quarterly",
        "semiannually", "semi-annually", "biannually", "bi-annually", "anually", "Mon-Fri", "Mon..Fri 9:00",
        "Sat,Sun 10:00", "*-02-29", "*-*-31", "*-02-30", "*-02~03", "*-05~07/1", "Mon *-05~07/1",
        "Fri *-*-1..7 18:00", "*-*~01", "*-*~1..7", "*:*:0/0.5", "*:*:*", "*-*-* *:00/15:00", "@1800000000",
        "2026-03-29 02:30", "*-*-* 02:30", "*-*-* 01:30", "*-*-* 02:00..03:00", "*-*-* 00:00 Asia/Tokyo",
        "Mon..Fri 09:00 America/New_York", "*-*-01,30", "Fri *-*-13", "Mnday 9:00", "*-*-* 25:00", "*/5",
        "*:*/5", "*-13-01", "1969-01-01", "2200-01-01", "*:*:60", "*-02~29", "*-01~10,24,11", "Mon..", "",
        "daily Mars/Olympus", "12", "*-*-* 24:00", "@-0", "*-*-* 0:0:0.0000005", "*:*:1.9999999",
    ]

    /// ~200 seeded random specs, cycling through every kind of syntax element.
    static func generated(count: Int, seed: UInt64) -> [String] {
        var g = SpecGenerator(rng: SeededGenerator(seed: seed))
        return (0..<count).map { g.spec(kind: $0) }
    }

    static let specs = handPicked + generated(count: 200, seed: 252)

    @Test(.enabled(if: analyze != nil), arguments: [
        "2026-03-29T00:00:00Z", "2028-02-28T12:00:00Z", "2025-12-31T23:59:30Z",
    ])
    func utc(_ base: String) throws {
        try compare(zone: "UTC", base: base)
    }

    /// Base times a little before DST transitions of 2025–2027 (UTC), per zone.
    static let zoneBases: [(String, [String])] = [
        ("Europe/Berlin", ["2026-03-29T00:00:00Z", "2026-10-24T23:30:00Z", "2025-10-25T22:00:00Z", "2027-03-27T23:00:00Z"]),
        ("America/New_York", ["2026-03-08T05:00:00Z", "2026-11-01T04:30:00Z", "2025-11-01T06:00:00Z", "2027-03-14T03:00:00Z"]),
        // 30-minute DST: 02:00 +11 falls back to 01:30, 02:00 +10:30 springs to 02:30
        ("Australia/Lord_Howe", ["2026-04-04T13:00:00Z", "2026-10-03T14:00:00Z", "2025-10-03T13:00:00Z", "2027-04-03T14:30:00Z"]),
        // transitions at midnight: 24:00 -> 23:00 in April, 24:00 -> 01:00 in September
        ("America/Santiago", ["2026-04-05T01:00:00Z", "2026-09-06T02:30:00Z", "2025-09-06T03:00:00Z", "2027-04-03T02:00:00Z"]),
        // negative DST in tzdata: winter (GMT) is the "daylight" time, summer (IST) the standard one
        ("Europe/Dublin", ["2026-03-28T23:30:00Z", "2026-10-24T23:00:00Z", "2025-10-25T22:30:00Z", "2027-03-27T23:59:59Z"]),
    ]

    static var zoneCases: [(String, String)] {
        zoneBases.flatMap { zone, bases in bases.map { (zone, $0) } }
    }

    @Test(.enabled(if: analyze != nil), arguments: zoneCases)
    func zone(_ zone: String, _ base: String) throws {
        try #require(Self.loadZone(zone) != nil, "no zone file for \(zone)")
        try compare(zone: zone, base: base)
    }

    // MARK: - Running systemd-analyze

    struct Expected {
        enum Outcome: Equatable { case rejected, computationFailed, elapses([Int64]) }
        var normalized: String?
        var outcome: Outcome
    }

    /// Runs one `systemd-analyze calendar` for all specs and splits its output per spec.
    static func runAnalyze(zone: String, baseSeconds: Int64, specs: [String]) throws -> [Expected] {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: analyze!)
        process.arguments = ["--no-pager", "calendar", "--iterations=\(iterations)", "--base-time=@\(baseSeconds)", "--"] + specs
        process.environment = ["TZ": zone, "LC_ALL": "C", "SYSTEMD_COLORS": "0", "PATH": "/usr/bin:/bin"]
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let stdout = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let stderr = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()

        // One block per spec, separated by one empty line; a spec that failed prints an empty block.
        var blocks: [[String]] = [[]]
        for line in stdout.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.isEmpty { blocks.append([]) } else { blocks[blocks.count - 1].append(String(line)) }
        }
        return specs.indices.map { index in
            let block = index < blocks.count ? blocks[index] : []
            let spec = specs[index]
            if block.isEmpty {
                let rejected = stderr.contains("Failed to parse calendar specification '\(spec)'")
                return Expected(normalized: nil, outcome: rejected ? .rejected : .computationFailed)
            }
            var normalized: String?
            var elapses: [Int64] = []
            let lines = block.map { $0.trimmingCharacters(in: .whitespaces) }
            for (i, line) in lines.enumerated() {
                if line.hasPrefix("Normalized form: ") {
                    normalized = String(line.dropFirst("Normalized form: ".count))
                } else if line.hasPrefix("Next elapse: ") || line.hasPrefix("Iter. #") {
                    let value = line[line.index(after: line.firstIndex(of: ":")!)...].trimmingCharacters(in: .whitespaces)
                    if value == "never" { continue }
                    // The local time, then "(in UTC): ..." unless the local zone is UTC.
                    var utcLine = value
                    if i + 1 < lines.count, lines[i + 1].hasPrefix("(in UTC): ") {
                        utcLine = String(lines[i + 1].dropFirst("(in UTC): ".count))
                    }
                    elapses.append(parseUTCLine(utcLine))
                }
            }
            return Expected(normalized: normalized, outcome: .elapses(elapses))
        }
    }

    /// `Sun 2026-03-29 01:00:00 UTC` -> seconds since the epoch.
    static func parseUTCLine(_ text: String) -> Int64 {
        let parts = text.split(separator: " ")
        precondition(parts.count == 4 && parts[3] == "UTC", "unexpected timestamp \(text)")
        let wall = try! RFC3339.parse("\(parts[1])T\(parts[2])Z")
        return wall.nanosecondsSinceEpoch / 1_000_000_000
    }

    static func loadZone(_ name: String) -> ZoneRules? {
        if name == "UTC" { return ZoneRules.utc }
        guard let data = FileManager.default.contents(atPath: "/usr/share/zoneinfo/" + name) else { return nil }
        return try? ZoneRules(tzif: [UInt8](data), name: name)
    }

    // MARK: - Comparing

    func compare(zone: String, base: String) throws {
        let baseMicros = try RFC3339.parse(base).nanosecondsSinceEpoch / 1000
        let processZone = try #require(Self.loadZone(zone))
        let expected = try Self.runAnalyze(zone: zone, baseSeconds: baseMicros / 1_000_000, specs: Self.specs)
        var zoneCache: [String: ZoneRules?] = [:]
        for (spec, want) in zip(Self.specs, expected) {
            let context = "spec \"\(spec)\" in TZ=\(zone), base \(base)"
            // Parse, and validate a named zone as the caller (and systemd) does.
            let parsed: CalendarSpec? = try? CalendarSpec.parse(spec)
            var rules: ZoneRules? = processZone
            if let parsed, let name = parsed.timeZone, name != "UTC" {
                if zoneCache[name] == nil { zoneCache[name] = Self.loadZone(name) }
                rules = zoneCache[name]!
            }
            guard let parsed, let rules else {
                #expect(want.outcome == .rejected, "\(context): systemd accepts it (normalised \(want.normalized ?? "?")), timerd rejects it")
                continue
            }
            var ours: [Int64] = []
            var after = baseMicros
            var failed = false
            for _ in 0..<Self.iterations {
                guard let next = parsed.next(after: after, in: rules) else { failed = true; break }
                ours.append(next)
                after = next
            }
            switch want.outcome {
            case .rejected:
                Issue.record("\(context): systemd rejects it, timerd accepts it as \(parsed.normalized)")
            case .computationFailed:
                // systemd gave up on an elapse (its 1000-iteration safety valve) and printed nothing more.
                #expect(failed, "\(context): systemd failed to compute an elapse, timerd found \(ours.map(Self.show))")
            case .elapses(let theirs):
                #expect(parsed.normalized == want.normalized, "\(context): normalised form differs")
                // systemd-analyze shows whole seconds.
                let oursSeconds = ours.map { $0 >= 0 ? $0 / 1_000_000 : ($0 - 999_999) / 1_000_000 }
                #expect(oursSeconds == theirs,
                        "\(context): systemd \(theirs.map { Self.show($0 * 1_000_000) }), timerd \(ours.map(Self.show))")
            }
        }
    }

    static func show(_ micros: Int64) -> String {
        RFC3339.format(WallTime(nanosecondsSinceEpoch: micros * 1000))
    }
}

/// Random calendar specs covering every syntax element, mostly valid, some not (values out of range,
/// misspelled weekdays, impossible repetitions).
struct SpecGenerator {
    var rng: SeededGenerator

    mutating func int(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &rng) }
    mutating func chance(_ p: Double) -> Bool { Double.random(in: 0..<1, using: &rng) < p }
    mutating func pick(_ items: [String]) -> String { items[int(0...(items.count - 1))] }

    mutating func fraction() -> String {
        var text = "."
        for _ in 0..<int(1...7) { text += String(int(0...9)) }
        return text
    }

    /// `a`, `a..b`, `a/n` or `a..b/n`; now and then one that systemd rejects (a range that runs backwards,
    /// a repetition that cannot fire twice). `range` may itself stretch a little past the valid values.
    mutating func element(_ range: ClosedRange<Int>, width: Int = 2, seconds: Bool = false) -> String {
        let first = int(range)
        let last = chance(0.9) ? int(first...range.upperBound) : int(range)
        var start = String(first)
        if chance(0.6) { start = String(repeating: "0", count: max(0, width - start.count)) + start }
        if seconds && chance(0.25) { start += fraction() }
        let room = max(1, (range.upperBound - first) / 2)
        var step = String(chance(0.9) ? int(1...room) : int(1...max(1, range.upperBound - range.lowerBound)))
        if seconds && chance(0.3) { step = String(int(0...2)) + fraction() }
        switch int(0...9) {
        case 0...3: return start
        case 4...5: return start + ".." + String(last)
        case 6...8: return start + "/" + step
        default: return start + ".." + String(last) + "/" + String(int(1...4))
        }
    }

    mutating func list(_ range: ClosedRange<Int>, width: Int = 2, seconds: Bool = false, star: Double = 0.35) -> String {
        if chance(star) { return "*" }
        var elements: [String] = []
        for _ in 0..<(chance(0.7) ? 1 : int(2...3)) { elements.append(element(range, width: width, seconds: seconds)) }
        return elements.joined(separator: ",")
    }

    mutating func weekdays() -> String {
        let names = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun", "monday", "Friday", "SUN"]
        if chance(0.05) { return pick(["Tues", "Mnday", "Fri..Mon", "Mon..", "Sat,,Sun"]) }
        var parts: [String] = []
        for _ in 0..<int(1...2) {
            switch int(0...2) {
            case 0, 1:
                let a = int(0...6)
                let b = chance(0.9) ? int(a...6) : int(0...6)
                parts.append(names[a] + (chance(0.5) ? ".." : "-") + names[b])
            default: parts.append(pick(names))
            }
        }
        return parts.joined(separator: ",")
    }

    mutating func years() -> String {
        switch int(0...3) {
        case 0: return list(20...40, width: 2, star: 0)
        case 1: return list(2024...2032, width: 4, star: 0)
        case 2: return list(1969...2200, width: 4, star: 0)
        default: return "*"
        }
    }

    mutating func time(seconds: Bool) -> String {
        let hours = list(0...(chance(0.97) ? 23 : 24))
        let minutes = list(0...(chance(0.97) ? 59 : 60))
        guard seconds else { return hours + ":" + minutes }
        return hours + ":" + minutes + ":" + list(0...59, seconds: true)
    }

    /// Hours and minutes where DST transitions happen (01:00–03:00, midnight).
    mutating func dstTime() -> String {
        let hours = pick(["*", "0", "1", "2", "3", "23", "0..3", "1..2", "0/2", "1,2", "00,01,02"])
        let minutes = pick(["*", "00", "15", "30", "45", "0/15", "0/30", "20..40", "59"])
        let seconds = pick(["", ":00", ":*", ":30", ":0/20", ":59.5"])
        return hours + ":" + minutes + seconds
    }

    mutating func spec(kind: Int) -> String {
        switch kind % 12 {
        case 0:
            return pick(["minutely", "hourly", "daily", "monthly", "weekly", "yearly", "annually", "quarterly",
                         "semiannually", "semi-annually", "biannually", "DAILY", "Weekly"])
        case 1:
            return weekdays()
        case 2:
            return weekdays() + " " + time(seconds: chance(0.5))
        case 3:
            return years() + "-" + list(1...(chance(0.95) ? 12 : 13)) + "-" + list(1...(chance(0.95) ? 31 : 32))
                + " " + time(seconds: chance(0.5))
        case 4:
            return list(1...12) + "-" + list(1...31) + (chance(0.5) ? "" : " " + time(seconds: false))
        case 5:
            // days from the end of the month
            return (chance(0.5) ? "*-" : "") + list(1...12, star: 0.5) + "~" + list(1...(chance(0.9) ? 28 : 29), star: 0.1)
                + (chance(0.5) ? "" : " " + time(seconds: false))
        case 6:
            return time(seconds: false)
        case 7:
            return "*-*-* " + list(0...23) + ":" + list(0...59) + ":" + list(0...59, seconds: true, star: 0.1)
        case 8:
            return (chance(0.4) ? weekdays() + " " : "") + years() + "-" + list(1...12) + "-" + list(1...31)
        case 9:
            let zone = pick(["UTC", "utc", "Europe/Berlin", "Asia/Tokyo", "America/New_York", "Etc/UTC", "Mars/Olympus"])
            return pick(["daily", "Mon..Fri 9:00", "*-*-* 02:30", "*:0/30", "*-*~01 12:00"]) + " " + zone
        case 10:
            return "@" + String(int(1_700_000_000...1_900_000_000))
        default:
            return (chance(0.3) ? pick(["Sun", "Sat,Sun", "Mon..Fri", "Sun..Tue"]) + " " : "")
                + (chance(0.3) ? pick(["*-*-* ", "*-*-01..07 ", "*-03,04,09,10,11-* ", "*-*~01 "]) : "") + dstTime()
        }
    }
}
