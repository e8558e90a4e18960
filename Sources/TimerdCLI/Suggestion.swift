/// "Did you mean …?" for mistyped verbs and flags.
enum Suggestion {
    /// The candidate closest to `word`, if it is close enough to be a likely typo: same text ignoring
    /// case and `_`/`-`, or within 1 edit (2 for words longer than 4 characters). Ties go to the earlier
    /// candidate.
    static func closest(to word: String, in candidates: [String]) -> String? {
        let normalized = normalize(word)
        if let same = candidates.first(where: { normalize($0) == normalized }) { return same }
        let limit = word.count > 4 ? 2 : 1
        var best: (candidate: String, distance: Int)?
        for candidate in candidates {
            let distance = editDistance(normalized, normalize(candidate))
            if distance <= limit, distance < (best?.distance ?? Int.max) { best = (candidate, distance) }
        }
        return best?.candidate
    }

    private static func normalize(_ word: String) -> String {
        String(word.lowercased().map { $0 == "_" ? "-" : $0 })
    }

    /// Levenshtein distance over Unicode scalars, with adjacent transpositions counting as one edit.
    static func editDistance(_ a: String, _ b: String) -> Int {
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
