import Testing
import TimerdCore
import TimerdProtocol

/// A tiny deterministic PRNG (xorshift64*), so generated tests are reproducible without Foundation.
struct Xorshift: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) { state = seed == 0 ? 0x9E37_79B9_7F4A_7C15 : seed }

    mutating func next() -> UInt64 {
        state ^= state >> 12
        state ^= state << 25
        state ^= state >> 27
        return state &* 0x2545_F491_4F6C_DD1D
    }
}

/// Runs `body` and returns the `TimerdError` it threw, or nil when it did not throw.
/// (Any other error is recorded as a test issue.)
func caught<T>(_ body: () throws -> T) -> TimerdError? {
    do {
        _ = try body()
        return nil
    } catch let error as TimerdError {
        return error
    } catch {
        Issue.record("unexpected error type: \(error)")
        return nil
    }
}

/// Word fragments that exercise quoting: separators, quotes, escapes, `=`, `--`, control characters,
/// combining marks (also right where a quote would go), non-ASCII whitespace and multi-byte scalars.
let trickyFragments: [String] = [
    "a", "Z", "_", "0", "-", "--", "=", "x=", "k_1=", " ", "\t", "'", "\"", "\\", "\n", "\r", "\r\n",
    "\u{0}", "\u{1B}", "\u{7F}", "\u{85}", "\u{A0}", "\u{2028}", "\u{3000}", "\u{301}", "e\u{301}",
    "é", "日本", "👍🏽", "🇫🇷", "$HOME", "*", "#", ";", "|", "&&", "\\n", "''", "\"\"", "OK", "ERR",
]

func randomWord(_ rng: inout Xorshift) -> String {
    let parts = Int.random(in: 0...4, using: &rng)
    var word = ""
    for _ in 0..<parts { word += trickyFragments.randomElement(using: &rng)! }
    return word
}

func randomKey(_ rng: inout Xorshift) -> String {
    let first = Array("abcxyzABZ_")
    let rest = Array("abcXYZ_019")
    var key = String(first.randomElement(using: &rng)!)
    for _ in 0..<Int.random(in: 0...6, using: &rng) { key.append(rest.randomElement(using: &rng)!) }
    return key
}

/// Byte-exact comparison (Swift's `String ==` uses canonical equivalence, which would hide a combining
/// mark moving or a precomposed `é` replacing `e\u{301}`).
func utf8(_ words: [String]) -> [[UInt8]] { words.map { Array($0.utf8) } }

func utf8(_ request: Request) -> [[[UInt8]]] {
    [
        [Array(request.verb.rawValue.utf8)],
        utf8(request.positionals),
        request.options.flatMap { [Array($0.key.utf8), Array($0.value.utf8)] },
        request.argv.map { [[1]] + utf8($0) } ?? [[0]],
    ]
}
