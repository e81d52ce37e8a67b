package snapshot

import (
	"strconv"
	"strings"
)

func itoa(i int32) string { return strconv.Itoa(int(i)) }

func splitPort(p string) (proto, ip, port string) {
	parts := strings.SplitN(p, "/", 3)
	if len(parts) != 3 {
		return p, "", ""
	}
	return parts[0], parts[1], parts[2]
}
