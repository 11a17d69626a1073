package config

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// DefaultEnvPrefix is the prefix of the environment variables Load reads.
const DefaultEnvPrefix = "SHIPD"

var durationType = reflect.TypeOf(Duration{})

// applyEnv puts the PREFIX_* environment variables on top of cfg: one for every setting, named
// after its JSON key path, upper-cased and joined with "_" (SHIPD_DB_MAX_CONNS). A variable set
// to "" counts as unset; an empty prefix applies none.
func applyEnv(cfg *Config, prefix string, lookup func(string) (string, bool)) error {
	prefix = strings.TrimSuffix(prefix, "_")
	if prefix == "" {
		return nil
	}
	return applyEnvTo(reflect.ValueOf(cfg).Elem(), prefix, lookup)
}

func applyEnvTo(v reflect.Value, prefix string, lookup func(string) (string, bool)) error {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		key := strings.Split(t.Field(i).Tag.Get("json"), ",")[0]
		if key == "" || key == "-" {
			continue
		}
		name := prefix + "_" + strings.ToUpper(key)
		field := v.Field(i)
		if field.Kind() == reflect.Struct && field.Type() != durationType {
			if err := applyEnvTo(field, name, lookup); err != nil {
				return err
			}
			continue
		}
		text, ok := lookup(name)
		if !ok || text == "" {
			continue
		}
		if err := setFromText(field, text); err != nil {
			return fmt.Errorf("config: environment variable %s=%q: %v", name, text, err)
		}
	}
	return nil
}

func setFromText(field reflect.Value, text string) error {
	switch {
	case field.Type() == durationType:
		d, err := time.ParseDuration(strings.TrimSpace(text))
		if err != nil {
			return err
		}
		field.Set(reflect.ValueOf(Duration{d}))
	case field.Kind() == reflect.String:
		field.SetString(text)
	case field.Kind() == reflect.Int:
		n, err := strconv.Atoi(strings.TrimSpace(text))
		if err != nil {
			return fmt.Errorf("not a whole number")
		}
		field.SetInt(int64(n))
	case field.Kind() == reflect.Bool:
		b, err := strconv.ParseBool(strings.TrimSpace(text))
		if err != nil {
			return fmt.Errorf("not a boolean")
		}
		field.SetBool(b)
	case field.Kind() == reflect.Slice && field.Type().Elem().Kind() == reflect.String:
		items := []string{}
		for _, item := range strings.Split(text, ",") {
			if item = strings.TrimSpace(item); item != "" {
				items = append(items, item)
			}
		}
		field.Set(reflect.ValueOf(items))
	default:
		return fmt.Errorf("settings of type %s cannot come from the environment", field.Type())
	}
	return nil
}
