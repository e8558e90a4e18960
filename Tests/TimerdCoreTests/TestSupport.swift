import Testing
@testable import TimerdCore

/// A small deterministic generator (SplitMix64), so "random" tables are the same on every run.
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// Runs `body`, returning the `TimerdError` it threw, or nil when it succeeded.
func caught<T>(sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> T) -> TimerdError? {
    do {
        _ = try body()
        return nil
    } catch let error as TimerdError {
        return error
    } catch {
        Issue.record("expected a TimerdError, got \(error)", sourceLocation: sourceLocation)
        return TimerdError(.internal, "\(error)")
    }
}

/// Expects `body` to throw a `TimerdError` with `code`, `key` (when given: `.some(nil)` means "no key"),
/// and a message containing every string in `mentions`. Returns the error for further checks.
@discardableResult
func expectError<T>(
    _ code: TimerdError.Code, key: String?? = nil, mentions: [String] = [],
    sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> T
) -> TimerdError? {
    guard let error = caught(sourceLocation: sourceLocation, body) else {
        Issue.record("expected \(code.rawValue) error, but it succeeded", sourceLocation: sourceLocation)
        return nil
    }
    #expect(error.code == code, "message: \(error.message)", sourceLocation: sourceLocation)
    if let key {
        #expect(error.key == key, "message: \(error.message)", sourceLocation: sourceLocation)
    }
    for text in mentions {
        #expect(error.message.contains(text), "message \"\(error.message)\" should mention \"\(text)\"", sourceLocation: sourceLocation)
    }
    return error
}

/// Shorthand for building options: `opts(("every", "5s"), ("command", "true"))`.
func opts(_ pairs: (String, String)...) -> [KeyValue] { pairs.map { KeyValue($0.0, $0.1) } }

func name(_ text: String) -> JobName { try! JobName(text) }

extension Duration {
    static func ns(_ value: Int64) -> Duration { .nanoseconds(value) }
}

let nsPerSecond: Int64 = 1_000_000_000
let nsPerMinute: Int64 = 60 * nsPerSecond
let nsPerHour: Int64 = 60 * nsPerMinute
let nsPerDay: Int64 = 24 * nsPerHour
let nsPerWeek: Int64 = 7 * nsPerDay
