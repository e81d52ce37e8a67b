package placement

func failAll(unit Unit, d Diagnosis) Result {
	res := Result{}
	for _, m := range unit.Members {
		res.Unplaced = append(res.Unplaced, Failure{Pod: m.Pod, Diagnosis: d})
	}
	return res
}
