package mqtt

import (
	"fmt"
	"strings"
)

// Topic names and filters (section 4.7). Levels are separated by '/'; a
// filter may hold the wildcards '+' (one level) and '#' (any number of
// levels, last). Shared subscriptions (section 4.8.2, MQTT 5.0) are
// filters of the form $share/{ShareName}/{filter}.

// ValidateString checks the rules of a UTF-8 Encoded String: at most
// 65,535 bytes, well-formed UTF-8 (no surrogates) and no U+0000. The
// error wraps ErrUTF8.
func ValidateString(s string) error {
	if len(s) > maxFieldLen {
		return fmt.Errorf("mqtt: string of %d bytes: %w: longer than %d bytes", len(s), ErrUTF8, maxFieldLen)
	}
	if p := utf8Problem(s); p != "" {
		return fmt.Errorf("mqtt: string %q: %w: %s", s, ErrUTF8, p)
	}
	return nil
}

// ValidateTopicName checks a topic name, as PUBLISH and a will carry it:
// a valid string of at least one byte ([MQTT-4.7.3-1]) without wildcards
// ([MQTT-3.3.2-2]). MQTT 5.0's empty topic name with a Topic Alias is
// Decode's to allow, not this function's. The error wraps ErrTopicName,
// or ErrUTF8 for a string that is not valid.
func ValidateTopicName(name string) error {
	if err := ValidateString(name); err != nil {
		return err
	}
	if p := topicNameProblem(name); p != "" {
		return fmt.Errorf("mqtt: topic name %q: %w: %s", name, ErrTopicName, p)
	}
	return nil
}

// topicNameProblem says what makes a valid string not a topic name, or "".
func topicNameProblem(name string) string {
	if name == "" {
		return "empty"
	}
	if i := strings.IndexAny(name, "+#"); i >= 0 {
		return fmt.Sprintf("wildcard %q at byte %d", name[i], i)
	}
	return ""
}

// ValidateTopicFilter checks a topic filter: a valid string of at least
// one byte whose '#' stands alone as the last level ([MQTT-4.7.1-1]) and
// whose '+' stand alone as whole levels ([MQTT-4.7.1-2]). It does not
// treat $share/ specially (MQTT 3.1.1 has no shared subscriptions); see
// ParseSharedSubscription. The error wraps ErrTopicFilter, or ErrUTF8.
func ValidateTopicFilter(filter string) error {
	if err := ValidateString(filter); err != nil {
		return err
	}
	if p := topicFilterProblem(filter); p != "" {
		return fmt.Errorf("mqtt: topic filter %q: %w: %s", filter, ErrTopicFilter, p)
	}
	return nil
}

// topicFilterProblem says what makes a valid string not a topic filter,
// or "".
func topicFilterProblem(filter string) string {
	if filter == "" {
		return "empty"
	}
	for i := 0; i < len(filter); i++ {
		c := filter[i]
		if c != '+' && c != '#' {
			continue
		}
		if i > 0 && filter[i-1] != '/' {
			return fmt.Sprintf("wildcard %q at byte %d does not start a level", c, i)
		}
		if c == '#' && i != len(filter)-1 {
			return fmt.Sprintf("'#' at byte %d is not the last character", i)
		}
		if c == '+' && i+1 < len(filter) && filter[i+1] != '/' {
			return fmt.Sprintf("'+' at byte %d does not end its level", i)
		}
	}
	return ""
}

// HasWildcards reports whether a topic filter holds '+' or '#': whether a
// subscription to it is a wildcard subscription.
func HasWildcards(filter string) bool { return strings.ContainsAny(filter, "+#") }

// sharePrefix starts every shared subscription's filter.
const sharePrefix = "$share/"

// ParseSharedSubscription splits an MQTT 5.0 shared subscription's filter,
// $share/{ShareName}/{filter}, into its share name and topic filter. A
// filter that does not start with "$share/" is not shared: ok is false,
// and topicFilter is filter. One that does must have a share name of at
// least one character without '/', '+' or '#' ([MQTT-4.8.2-1],
// [MQTT-4.8.2-2]) and a valid topic filter after it; the error wraps
// ErrTopicFilter.
func ParseSharedSubscription(filter string) (shareName, topicFilter string, ok bool, err error) {
	if !strings.HasPrefix(filter, sharePrefix) {
		return "", filter, false, nil
	}
	if err := ValidateString(filter); err != nil {
		return "", "", true, err
	}
	shareName, topicFilter, p := splitShared(filter)
	if p != "" {
		return "", "", true, fmt.Errorf("mqtt: shared subscription %q: %w: %s", filter, ErrTopicFilter, p)
	}
	return shareName, topicFilter, true, nil
}

// splitShared splits a filter that starts with sharePrefix, and says what
// is wrong with it, or "".
func splitShared(filter string) (shareName, topicFilter, problem string) {
	rest := filter[len(sharePrefix):]
	i := strings.IndexByte(rest, '/')
	if i < 0 {
		return "", "", "no topic filter after the share name"
	}
	shareName, topicFilter = rest[:i], rest[i+1:]
	if shareName == "" {
		return "", "", "empty share name"
	}
	if strings.ContainsAny(shareName, "+#") {
		return "", "", fmt.Sprintf("share name %q holds a wildcard", shareName)
	}
	if p := topicFilterProblem(topicFilter); p != "" {
		return "", "", "topic filter " + p
	}
	return shareName, topicFilter, ""
}
