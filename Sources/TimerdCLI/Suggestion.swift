import TimerdCore

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
            let distance = KeySuggestion.editDistance(normalized, normalize(candidate))
            if distance <= limit, distance < (best?.distance ?? Int.max) { best = (candidate, distance) }
        }
        return best?.candidate
    }

    private static func normalize(_ word: String) -> String {
        String(word.lowercased().map { $0 == "_" ? "-" : $0 })
    }
}
