; Outline patterns for Rust. Captures: @definition.<kind> spans the definition, @name is its
; name. An impl block is a @scope: not listed itself, it names the parent of the fns inside.

(function_item name: (identifier) @name) @definition.function

; Trait methods without a default body.
(function_signature_item name: (identifier) @name) @definition.function

(struct_item name: (type_identifier) @name) @definition.struct

(union_item name: (type_identifier) @name) @definition.struct

(enum_item name: (type_identifier) @name) @definition.enum

(trait_item name: (type_identifier) @name) @definition.trait

(type_item name: (type_identifier) @name) @definition.type

(mod_item name: (identifier) @name) @definition.module

(const_item name: (identifier) @name) @definition.constant

(static_item name: (identifier) @name) @definition.constant

(impl_item
  type: [
    (type_identifier) @name
    (generic_type type: (type_identifier) @name)
    (scoped_type_identifier name: (type_identifier) @name)
  ]) @scope
