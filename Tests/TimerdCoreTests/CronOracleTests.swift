import Foundation
import Testing
@testable import TimerdCore
import TimerdTestSupport

/// Random cron expressions checked against an independent implementation: Python's croniter, run once
/// for the whole table by `cron_oracle.py` (next to this file). The interpreter is `$TIMERD_ORACLE_PYTHON`,
/// or `.build/oracle-venv/bin/python3` under the package root, which `make oracle-deps` creates.
///
/// croniter is asked for Vixie cron's semantics (see cron_oracle.py). Where it still differs from Vixie
/// cron / cronie, the generator leaves the construct out -- and only that construct:
///  * Equal ranges (`5-5`, `jan-jan`): croniter widens them to the whole field; cron means the one value.
///    Ranges are generated with start < end.
///  * `a/n` in day-of-week: croniter reads it as `a-6/n`, timerd as `a-7/n` (the field's maximum; 7 is
///    Sunday), so the two differ exactly when 7 is in `a, a+n, ...`, i.e. when (7 - a) % n == 0 for a >= 1
///    (`1/2` is Mon, Wed, Fri for croniter, and Sunday too for timerd). Only those are left out.
///  * `*` as a list item after the first in day-of-month or day-of-week (`1,*/2`): croniter decides
///    "restricted or not" on the expanded set and on any `*` in the text, cron only on the first
///    character, so they disagree on the day-of-month/day-of-week rule. A bare `*` inside a list is not
///    generated in any field (croniter keeps it as a literal "*" value).
/// Reversed (wrap-around) ranges, `L`, `W`, `#`, `?`, `H` and 7-field forms are croniter extensions that
/// timerd rejects; they are not generated either.
@Suite("CronExpression against croniter")
struct CronOracleTests {
    static let expressionCount = 700
    static let firesPerExpression = 5

    /// Hand-picked expressions, each run from a few random bases besides the random ones.
    static let chosen = [
        "@hourly", "@daily", "@midnight", "@weekly", "@monthly", "@yearly", "@annually",
        "* * * * *", "* * * * * *", "0 9 * * 1-5", "0 9 * * mon-fri", "*/5 * * * * *", "0 0 * * 7", "0 0 * * 5-7",
        "0 0 * * 3-7/2", "0 0 * * 0-7", "0 0 * * */2", "0 0 13 * fri", "0 0 13 * */2", "0 0 */10 * mon",
        "0 0 1-31 * mon", "0 0 1 * 0-6", "0 0 29 2 *", "0 0 29 2 mon", "0 0 31 * *", "0 0 30 2 *", "0 0 31 4 *",
        "0 0 30 2 mon", "50/5 * * * *", "59/15 * * * *", "0 0 1 feb/4 *", "0 12 1 JAN-Mar,Jul *",
        "15,45 30 8-18/2 * * Sat,SUN", "0 0 1 1 0", "*/7 */5 */3 */2 */4", "0 0 * * 2/2", "0 0 * * 0/3",
    ]

    struct Case {
        var expression: String
        var base: Int64
    }

    @Test("random expressions: the next fire times agree with croniter")
    func agreesWithCroniter() throws {
        var generator = CronGenerator(rng: SeededGenerator(seed: 0xC50_2026))
        let cases = Self.chosen.flatMap { expression in
            (0..<3).map { _ in Case(expression: expression, base: generator.base()) }
        } + (0..<Self.expressionCount).map { _ in generator.nextCase() }

        // Every generated expression must parse before croniter is worth asking.
        var parsed: [CronExpression] = []
        for item in cases {
            do {
                parsed.append(try CronExpression.parse(item.expression))
            } catch {
                Issue.record("generated \"\(item.expression)\" does not parse: \(error.message)")
                return
            }
        }

        let (version, lines) = try runOracle(cases)
        try #require(lines.count == cases.count, "croniter (\(version)) printed \(lines.count) lines for \(cases.count) cases")

        var disagreements: [String] = []
        for (index, item) in cases.enumerated() {
            let line = lines[index]
            if line.hasPrefix("ERROR") {
                disagreements.append("\"\(item.expression)\": croniter rejects it (\(line)), timerd accepts it")
                continue
            }
            let expected = line.split(separator: " ").map { $0 == "NONE" ? nil : Int64($0) }
            var actual: [Int64?] = []
            var current: Int64? = item.base
            for _ in 0..<expected.count {
                current = current.flatMap { parsed[index].next(after: $0) }
                actual.append(current)
            }
            if actual != expected {
                disagreements.append("\"\(item.expression)\" after \(item.base) (\(cronShow(item.base))): "
                    + "croniter \(expected.map(cronShow)), timerd \(actual.map(cronShow))")
                continue
            }
            // `matches` must agree with `next`: each fire time matches, the second before it does not
            // (unless that is the previous fire time or the base).
            var previous = item.base
            for time in actual.compactMap({ $0 }) {
                if !parsed[index].matches(localSeconds: time) {
                    disagreements.append("\"\(item.expression)\": next gave \(cronShow(time)) but matches says no")
                }
                if time - 1 > previous, parsed[index].matches(localSeconds: time - 1) {
                    disagreements.append("\"\(item.expression)\": matches \(cronShow(time - 1)), before next \(cronShow(time))")
                }
                previous = time
            }
        }
        for text in disagreements.prefix(25) { Issue.record("croniter (\(version)) disagrees: \(text)") }
        #expect(disagreements.isEmpty, "\(disagreements.count) of \(cases.count) expressions disagree with croniter \(version)")
    }

    @Test("the generator covers every syntax element")
    func generatorCoverage() {
        var generator = CronGenerator(rng: SeededGenerator(seed: 0xC50_2026))
        let texts = Self.chosen + (0..<Self.expressionCount).map { _ in generator.nextCase().expression }
        let fieldTexts = texts.filter { !$0.hasPrefix("@") }.map { $0.split(separator: " ").map(String.init) }
        func some(_ description: String, _ predicate: (String) -> Bool) {
            let found = texts.contains(where: predicate)
            #expect(found, "no generated expression has \(description)")
        }
        some("six fields") { $0.split(separator: " ").count == 6 }
        some("five fields") { $0.split(separator: " ").count == 5 }
        for macro in ["@hourly", "@daily", "@midnight", "@weekly", "@monthly", "@yearly", "@annually"] {
            some(macro) { $0 == macro }
        }
        some("a list") { $0.contains(",") }
        some("a range") { $0.contains("-") }
        some("a range with a step") { $0.range(of: #"\d-\d+/"#, options: .regularExpression) != nil }
        some("*/n") { $0.contains("*/") }
        some("a/n") { $0.range(of: #"(^|[ ,])[0-9a-z]+/"#, options: [.regularExpression, .caseInsensitive]) != nil }
        some("a month name") { $0.range(of: "jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec", options: [.regularExpression, .caseInsensitive]) != nil }
        some("an upper-case name") { $0.range(of: "[A-Z]", options: .regularExpression) != nil }
        let dayOfWeek = fieldTexts.map { $0[$0.count - 1] }
        #expect(dayOfWeek.contains { $0.range(of: "sun|mon|tue|wed|thu|fri|sat", options: [.regularExpression, .caseInsensitive]) != nil })
        #expect(dayOfWeek.contains { $0.contains("7") }, "no day-of-week 7")
        // Both day fields restricted (OR rule), and one of them starting with `*` (AND rule).
        #expect(fieldTexts.contains { !$0[$0.count - 3].hasPrefix("*") && !$0[$0.count - 1].hasPrefix("*") })
        #expect(fieldTexts.contains { $0[$0.count - 3].hasPrefix("*/") && !$0[$0.count - 1].hasPrefix("*") })
        #expect(fieldTexts.contains { !$0[$0.count - 3].hasPrefix("*") && $0[$0.count - 1].hasPrefix("*/") })
    }

    // MARK: - Running croniter

    /// Runs cron_oracle.py once for all the cases (``CronOracle``); returns croniter's version and one
    /// output line per case.
    func runOracle(_ cases: [Case]) throws -> (String, [String]) {
        do {
            return try CronOracle.run(cases.map { ($0.expression, $0.base, Self.firesPerExpression) })
        } catch let error as CronOracle.Unavailable {
            Issue.record("\(error)")
            throw OracleUnavailable()
        }
    }

    struct OracleUnavailable: Error {}
}

/// `2025-01-31T09:30:00` for local seconds, or "none".
private func cronShow(_ seconds: Int64?) -> String {
    guard let seconds else { return "none" }
    return String(RFC3339.format(WallTime(seconds: seconds)).prefix(19))
}

/// Seeded random cron expressions over every syntax element timerd and croniter share (see the
/// exclusions on CronOracleTests), with base times from 1900 to 2150.
struct CronGenerator {
    var rng: SeededGenerator
    typealias Field = CronSyntax.Field

    mutating func int(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &rng) }
    mutating func chance(_ probability: Double) -> Bool { Double.random(in: 0..<1, using: &rng) < probability }

    mutating func nextCase() -> CronOracleTests.Case {
        CronOracleTests.Case(expression: expression(), base: base())
    }

    mutating func base() -> Int64 {
        let low: Int64 = -2_208_988_800  // 1900-01-01
        let high: Int64 = 5_680_281_600  // 2150-01-01
        var value = Int64.random(in: low..<high, using: &rng)
        let floorTo = { (value: Int64, unit: Int64) -> Int64 in
            let remainder = value % unit
            return value - (remainder < 0 ? remainder + unit : remainder)
        }
        switch int(0...9) {
        case 0...2: value = floorTo(value, 60)  // on a minute: "strictly after" matters
        case 3: value = floorTo(value, 86_400)
        case 4: value = floorTo(value, 86_400) - 1
        default: break
        }
        return value
    }

    mutating func expression() -> String {
        if chance(0.04) {
            let macros = ["@hourly", "@daily", "@midnight", "@weekly", "@monthly", "@yearly", "@annually"]
            return macros[int(0...macros.count - 1)]
        }
        var fields: [Field] = [.minute, .hour, .dayOfMonth, .month, .dayOfWeek]
        if chance(0.3) { fields.insert(.second, at: 0) }
        return fields.map { field($0) }.joined(separator: chance(0.1) ? "  " : " ")
    }

    mutating func field(_ field: Field) -> String {
        // Wide fields are mostly `*`, or every candidate day/second would be too rare to be interesting.
        let starChance: Double = switch field {
        case .second: 0.35
        case .minute, .hour: 0.3
        case .dayOfMonth, .dayOfWeek: 0.35
        case .month: 0.45
        }
        if chance(starChance) { return "*" }
        let count = chance(0.6) ? 1 : int(2...3)
        return (0..<count).map { item(field, first: $0 == 0) }.joined(separator: ",")
    }

    /// A number, or sometimes a name in a random case.
    mutating func value(_ field: Field, _ value: Int) -> String {
        let names = field.names
        let position = value - field.namesStart
        guard !names.isEmpty, position >= 0, position < names.count, chance(0.4) else { return String(value) }
        let name = names[position]
        switch int(0...3) {
        case 0: return name.uppercased()
        case 1: return name.prefix(1).uppercased() + name.dropFirst()
        default: return name
        }
    }

    mutating func step(_ field: Field) -> Int {
        let span = field.range.upperBound - field.range.lowerBound
        return chance(0.8) ? int(1...max(1, span / 2)) : int(1...span + 3)
    }

    mutating func item(_ field: Field, first: Bool) -> String {
        let range = field.range
        let isDayField = field == .dayOfMonth || field == .dayOfWeek
        while true {
            switch int(0...9) {
            case 0...2:
                return value(field, int(range))
            case 3...4:
                let low = int(range.lowerBound...range.upperBound - 1)
                let high = int(low + 1...range.upperBound)
                return "\(value(field, low))-\(value(field, high))"
            case 5...6:
                let low = int(range.lowerBound...range.upperBound - 1)
                let high = int(low + 1...range.upperBound)
                return "\(value(field, low))-\(value(field, high))/\(step(field))"
            case 7:
                if isDayField && !first { continue }
                return "*/\(step(field))"
            default:
                let start = int(range)
                let step = step(field)
                if field == .dayOfWeek, start >= 1, (7 - start) % step == 0 { continue }
                return "\(value(field, start))/\(step)"
            }
        }
    }
}
