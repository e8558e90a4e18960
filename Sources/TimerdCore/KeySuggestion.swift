/// "did you mean …?" hints for a misspelled key, option, verb or flag: the config's keys and a job's
/// options, timerd's command-line options, timerctl's verbs and flags.
public enum KeySuggestion {
    /// The key `key` was probably meant to be: its snake_case spelling, or one a typo or two away (one for
    /// keys of up to 4 characters). The first such key of `keys` wins.
    public static func closest(to key: String, among keys: [String]) -> String? {
        let snake = String(key.lowercased().map { $0 == "-" ? "_" : $0 })
        if snake != key, keys.contains(snake) { return snake }
        return keys.first { editDistance($0, snake) <= (key.count > 4 ? 2 : 1) }
    }

    /// ` (did you mean KEY?)`, or nothing.
    public static func suggest(for key: String, among keys: [String]) -> String {
        closest(to: key, among: keys).map { " (did you mean \($0)?)" } ?? ""
    }

    /// Levenshtein distance between `a` and `b` in Unicode scalars, with two adjacent characters swapped
    /// counting as one edit (`comamnd` is one edit from `command`).
    public static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a.unicodeScalars), b = Array(b.unicodeScalars)
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var previous2 = [Int](repeating: 0, count: b.count + 1)
        var previous = Array(0...b.count)
        var current = [Int](repeating: 0, count: b.count + 1)
        for i in 1...a.count {
            current[0] = i
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
                    current[j] = min(current[j], previous2[j - 2] + 1)
                }
            }
            (previous2, previous, current) = (previous, current, previous2)
        }
        return previous[b.count]
    }
}
